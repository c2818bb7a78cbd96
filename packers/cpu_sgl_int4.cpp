// See cpu_sgl_int4.h for the drawn layouts and the upstream definitions.
#include "packers/cpu_sgl_int4.h"

namespace moepack::packers {

// ---- weight ----

std::string CpuSglInt4WeightLayout::name() const {
  return layout_id::cpu_sgl_int4_weight_packed(source_ == CpuInt4Source::gptq ? layout_id::IntPacking::gptq : layout_id::IntPacking::awq,
                                               static_cast<int>(block_k_));
}

Accepts CpuSglInt4WeightLayout::accepts() const {
  if (block_k_ == 0 || block_k_ % 8 != 0) throw_internal(std::string(layout_id::head::cpu_sgl_int4_weight_packed) + ": block_k " + std::to_string(block_k_) + " is no multiple of 8");
  Accepts a;
  a.dtypes = Accepts::Dtypes::i32;
  const std::string b = std::to_string(block_k_);
  if (source_ == CpuInt4Source::gptq) {
    a.what = "one expert's int4 weight I32 [K/8, N] (packed along K)";
    a.rows_multiple = block_k_ / 8;
    a.rows_rule =
        "the op views K as K/" + b + " blocks of block_k = " + b + " inputs: K % " + b + " == 0, i.e. " + std::to_string(block_k_ / 8) + " packed rows";
    a.last_multiple = kCpuInt4BlockN;
    a.last_rule = "the op views N as N/32 blocks of BLOCK_N = 32 outputs: N % 32 == 0";
  } else {
    a.what = "one expert's int4 weight I32 [K, N/8] (AWQ, packed along N)";
    a.rows_multiple = block_k_;
    a.rows_rule = "the op views K as K/" + b + " blocks of block_k = " + b + " inputs: K % " + b + " == 0";
    a.last_multiple = kCpuInt4BlockN / 8;
    a.last_rule = "the op views N as N/32 blocks of BLOCK_N = 32 outputs: N % 32 == 0, i.e. 4 packed columns";
  }
  return a;
}

// ---- scales and zero points ----

std::string CpuSglInt4GroupRowsLayout::name() const {
  return what_ == CpuInt4GroupRows::scales_f32 ? layout_id::cpu_sgl_int4_blocked_scales() : layout_id::cpu_sgl_int4_blocked_zero_points();
}

Accepts CpuSglInt4GroupRowsLayout::accepts() const {
  Accepts a;
  a.dtypes = what_ == CpuInt4GroupRows::scales_f32 ? Accepts::Dtypes::float_bias : Accepts::Dtypes::one_byte;
  a.what = what_ == CpuInt4GroupRows::scales_f32 ? "one expert's group scales [G, N]" : "one expert's unpacked zero points [G, N]";
  a.last_multiple = kCpuInt4BlockN;
  a.last_rule = "the op views N as N/32 blocks of BLOCK_N = 32 outputs: N % 32 == 0";
  return a;
}

Units CpuSglInt4GroupRowsLayout::units(DType canonical) const {
  const unsigned bits = static_cast<unsigned>(dtype_bits(canonical));
  if (what_ == CpuInt4GroupRows::zero_points_i8) return {.canonical_bits = bits, .packed_bits = bits};
  return {.canonical_bits = bits, .packed_bits = 32, .converts = true};
}

}  // namespace moepack::packers
