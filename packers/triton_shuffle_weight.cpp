// See triton_shuffle_weight.h for the drawn layout and the upstream definition.
#include "packers/triton_shuffle_weight.h"

namespace moepack::packers {

std::string TritonShuffleWeightLayout::name() const {
  return layout_id::mxfp4_triton_shuffle_weight();
}

Accepts TritonShuffleWeightLayout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::whole_byte;
  a.ranks = Accepts::rank(1) | Accepts::rank(2);
  a.what = "one expert's 1-D or 2-D tensor";
  a.last_multiple = 2;
  a.last_rule = "the last axis must be even to split it into two halves";
  return a;
}

Units TritonShuffleWeightLayout::units(DType canonical) const {
  const unsigned bits = static_cast<unsigned>(dtype_bits(canonical));
  return {.canonical_bits = bits, .packed_bits = bits};
}

}  // namespace moepack::packers
