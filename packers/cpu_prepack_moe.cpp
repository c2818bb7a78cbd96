// See cpu_prepack_moe.h for the drawn layouts and the upstream definitions.
#include "packers/cpu_prepack_moe.h"

namespace moepack::packers {

namespace {

const char* isa_name(CpuMoeIsa isa) {
  switch (isa) {
    case CpuMoeIsa::vec: return "vec";
    case CpuMoeIsa::amx: return "amx";
    case CpuMoeIsa::neon: return "neon";
    case CpuMoeIsa::vsx: return "vsx";
  }
  return "";
}

}  // namespace

std::string CpuPrepackMoeWeightLayout::name() const {
  return layout_id::cpu_prepack_moe_weight(isa_name(isa_));
}

Accepts CpuPrepackMoeWeightLayout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::float_bias;
  a.what = "one expert's 2-D weight [O, K]";
  a.rows_multiple = 32;
  a.rows_rule = "prepack_moe_weight needs the output size (rows) to be a multiple of 32";
  switch (isa_) {
    case CpuMoeIsa::vec: break;
    case CpuMoeIsa::amx:
      a.last_multiple = 32;
      a.last_rule = "the AMX pack_weight needs the input size (columns) to be a multiple of 32 (16 words of two bf16)";
      break;
    case CpuMoeIsa::neon:
      a.dtypes = Accepts::Dtypes::bf16;
      a.dtype_rule = "MicroGemm<NEON> pack_weight raises for every type but bfloat16 (\"NEON BFMMLA MicroGemm only supports bfloat16.\")";
      a.last_multiple = 4;
      a.last_rule = "the NEON pack_weight needs the input size (columns) to be a multiple of 4 (bfmmla's K)";
      break;
    case CpuMoeIsa::vsx:
      a.last_multiple = 2;
      a.last_rule = "the VSX pack_weight needs the input size (columns) to be a multiple of 2";
      break;
  }
  return a;
}

Units CpuPrepackMoeWeightLayout::units(DType canonical) const {
  const unsigned bits = static_cast<unsigned>(dtype_bits(canonical));
  return {.canonical_bits = bits, .packed_bits = bits};
}

std::string CpuPrepackMoeWeightInt8Layout::name() const { return layout_id::cpu_prepack_moe_weight_int8_neon(); }

Accepts CpuPrepackMoeWeightInt8Layout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::i8;
  a.what = "one expert's 2-D int8 weight [O, K]";
  a.rows_multiple = 32;
  a.rows_rule = "prepack_moe_weight_int8 needs the output size (rows) to be a multiple of 32";
  a.last_multiple = kRun;
  a.last_rule = "prepack_moe_weight_int8 needs the input size (columns) to be a multiple of 8 (smmla's K)";
  return a;
}

}  // namespace moepack::packers
