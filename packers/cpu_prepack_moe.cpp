// See cpu_prepack_moe.h for the drawn layout and the upstream definition.
#include "packers/cpu_prepack_moe.h"

namespace moepack::packers {

std::string CpuPrepackMoeWeightLayout::name() const {
  return "vllm.cpu_prepack_moe_weight(" + std::string(isa_ == CpuMoeIsa::vec ? "vec" : "amx") + "," + std::string(pins::kVllm) + ")";
}

Accepts CpuPrepackMoeWeightLayout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::float_bias;
  a.what = "one expert's 2-D weight [O, K]";
  a.rows_multiple = 2 * kGroupRows;
  a.rows_rule = "prepack_moe_weight needs the output size (rows) to be a multiple of 32";
  if (isa_ == CpuMoeIsa::amx) {
    a.last_multiple = 2 * kGroupRows;
    a.last_rule = "the AMX pack_weight needs the input size (columns) to be a multiple of 32 (16 words of two bf16)";
  }
  return a;
}

Units CpuPrepackMoeWeightLayout::units(DType canonical) const {
  const unsigned bits = static_cast<unsigned>(dtype_bits(canonical));
  return {.canonical_bits = bits, .packed_bits = bits};
}

}  // namespace moepack::packers
