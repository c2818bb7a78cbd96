// See triton_wna16.h for the drawn layouts and the upstream definition.
#include "packers/triton_wna16.h"

namespace moepack::packers {

std::string TritonWna16WeightLayout::name() const {
  return use_ == Wna16WeightUse::triton ? layout_id::wna16_triton_weight() : layout_id::xpu_wna16_weight();
}

Accepts TritonWna16WeightLayout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::i32;
  a.what = "one expert's K-first I32 packed weight [K/pf, N]";
  return a;
}

std::string TritonWna16ZeroPointLayout::name() const { return layout_id::wna16_triton_zero_points(); }

Accepts TritonWna16ZeroPointLayout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::i32;
  a.what = "one expert's I32 packed zero points [G, N/pf]";
  return a;
}

}  // namespace moepack::packers
