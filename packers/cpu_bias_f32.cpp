// See cpu_bias_f32.h for the drawn layout and the upstream definition.
#include "packers/cpu_bias_f32.h"

namespace moepack::packers {
namespace {

Units widened_to_f32(DType canonical) {
  return {.canonical_bits = static_cast<unsigned>(dtype_bits(canonical)), .packed_bits = 32, .converts = true};
}

}  // namespace

Accepts BiasToF32Layout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::float_bias;
  a.ranks = Accepts::rank(1);
  a.what = "one expert's 1-D bias [N]";
  return a;
}

Units BiasToF32Layout::units(DType canonical) const { return widened_to_f32(canonical); }

Accepts ScalarToF32Layout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::float_bias;
  a.ranks = Accepts::rank(0);
  a.what = "one expert's scalar (shape [])";
  return a;
}

Units ScalarToF32Layout::units(DType canonical) const { return widened_to_f32(canonical); }

}  // namespace moepack::packers
