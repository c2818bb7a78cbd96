// What every packer shares, whichever vendor's layout it reproduces: the upstream versions the
// layouts follow (the one place they are written down), refusals that name the layout and the
// rule, size arithmetic, FP4 nibble access, element casts, and two building blocks used by
// several vendors (vLLM's w13 gate/up row orders and CUTLASS's 128x4 scale-factor atom).
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "lib/core/codecs.h"
#include "lib/core/error.h"
#include "lib/core/layout_ids.h"
#include "lib/core/tensor.h"

namespace moepack::packers {

// ---- reference pins ---------------------------------------------------------------------------
// Every layout id ends with the version of the code it follows, so an artifact says which
// upstream its bytes match. Packers name themselves through lib/core/layout_ids.h, which holds
// the versions; `pins` is its list, for the drawn examples and messages that quote a version.
namespace pins = ::moepack::layout_id::pin;

// ---- refusals and checks ----------------------------------------------------------------------

// A forbidden size is a checkpoint/deployment vLLM would refuse too (or an oracle bug that
// skipped the padding); either way it is reported as bad input naming layout and rule.
[[noreturn]] inline void refuse(std::string_view layout, std::span<const uint64_t> shape, const std::string& rule) {
  throw Error(ErrorKind::bad_input, std::string(layout) + ": canonical shape " + shape_string(shape) + " refused: " + rule);
}

// A buffer of the wrong size is the caller's bug: the sizes come from packed_shape.
inline void expect_bytes(std::string_view layout, std::string_view what, uint64_t have, uint64_t want) {
  if (have != want)
    throw_internal(std::string(layout) + ": " + std::string(what) + " buffer has " + std::to_string(have) +
                   " bytes, expected " + std::to_string(want));
}

inline constexpr uint64_t round_up(uint64_t x, uint64_t multiple) { return (x + multiple - 1) / multiple * multiple; }

// ---- FP4 nibbles --------------------------------------------------------------------------------
// FP4 nibble access in a row-major U8 tensor of `cols` logical FP4 elements per row
// (cols/2 bytes per row; element c of a row is the low nibble of byte c/2 when c is even).
inline uint8_t get_nibble(std::span<const uint8_t> bytes, uint64_t row, uint64_t cols, uint64_t col) {
  uint8_t b = bytes[static_cast<size_t>(row * (cols / 2) + col / 2)];
  return (col & 1) ? static_cast<uint8_t>(b >> 4) : static_cast<uint8_t>(b & 0xF);
}
inline void set_nibble(std::span<uint8_t> bytes, uint64_t row, uint64_t cols, uint64_t col, uint8_t code) {
  uint8_t& b = bytes[static_cast<size_t>(row * (cols / 2) + col / 2)];
  b = (col & 1) ? static_cast<uint8_t>((b & 0x0F) | (code << 4)) : static_cast<uint8_t>((b & 0xF0) | (code & 0xF));
}

// ---- element casts ------------------------------------------------------------------------------
// vLLM casts biases and static scales with torch's `.to(dtype)` (round to nearest even).
inline bool is_float_bias_dtype(DType t) { return t == DType::BF16 || t == DType::F16 || t == DType::F32; }

// The little-endian bits of one BF16/F16/F32 element, cast like torch's `.to(to)`. The same
// dtype keeps the bits, as torch leaves a tensor already in the target dtype: a round trip
// through float would quiet signalling NaNs and change their bits in the artifact.
inline uint64_t cast_float_bits(DType from, uint64_t bits, DType to) {
  if (from == to) return bits;
  float v;
  if (from == DType::F32) {
    const uint32_t word = static_cast<uint32_t>(bits);
    std::memcpy(&v, &word, 4);
  } else {
    const uint16_t half = static_cast<uint16_t>(bits);
    v = from == DType::BF16 ? bf16_to_float(half) : f16_to_float(half);
  }
  if (to == DType::F32) {
    uint32_t word;
    std::memcpy(&word, &v, 4);
    return word;
  }
  return to == DType::BF16 ? float_to_bf16(v) : float_to_f16(v);
}

// ---- vLLM's w13 gate/up row orders ---------------------------------------------------------------
// The row orders vLLM produces before a backend's own shuffle (FlashInfer TRT-LLM-gen and
// CUTLASS). Every order is a gather, out[r] = in[row_order_source(order, r, rows)], over ONE
// expert's rows (the w13 tensor holds 2I rows, I = padded intermediate size per partition):
//
//   order                   used by (vLLM e9d1398d9, fused_moe/oracle/mxfp4.py)       rows 0..5 of out
//   identity                w2 everywhere; w13 of backends that keep vLLM's order     0 1 2 3 4 5
//   swap_pairs              gpt-oss w13 on TRT-LLM (`swap_every_two_rows`),          1 0 3 2 5 4
//                           input interleaved [g0,u0,g1,u1,...] -> [u0,g0,u1,g1,...]
//   w3w1_interleave         generic [w1;w3] w13 on TRT-LLM (stack([w3,w1],dim=2)):   I 0 I+1 1 I+2 2
//                           = FlashInfer `reorder_rows_for_gated_act_gemm` of [w3;w1]
//   deinterleave_up_first   gpt-oss w13 on FlashInfer CUTLASS (rows ::2 / 1::2,      1 3 5 ... then 0 2 4 ...
//                           then halves swapped): [g0,u0,...] -> [u0,u1,...; g0,g1,...]
//   swap_halves             generic [w1;w3] w13 on FlashInfer CUTLASS                 I I+1 ... then 0 1 ...
//                           (`swap_w13_to_w31`, vllm/.../utils/flashinfer_utils.py)
//   cutedsl_w31_interleave64  NVFP4 [w1;w3] w13 on FlashInfer CuteDSL (halves swapped, then   I..I+63, 0..63, I+64..
//                           `interleave_linear_and_gate(group_size=64)`, flashinfer_fp4_moe.py)
//   cutedsl_deinterleave_interleave64  the same from interleaved rows (SWIGLUOAI models: up   1 3 .. 127, 0 2 .. 126, ...
//                           = rows 1::2, gate = rows 0::2, then the 64-row interleave)
// (AITER's gate-first de-interleave, vllm.aiter_deinterleave_gate_up_rows, is the same split as
// deinterleave_up_first with the halves the other way round; it has its own layout file.)
enum class RowOrder {
  identity,
  swap_pairs,
  w3w1_interleave,
  deinterleave_up_first,
  swap_halves,
  cutedsl_w31_interleave64,
  cutedsl_deinterleave_interleave64,
};

inline std::string_view row_order_id(RowOrder order) {
  switch (order) {
    case RowOrder::identity: return layout_id::rows::identity;
    case RowOrder::swap_pairs: return layout_id::rows::swap_pairs;
    case RowOrder::w3w1_interleave: return layout_id::rows::w3w1_interleave;
    case RowOrder::deinterleave_up_first: return layout_id::rows::deinterleave_up_first;
    case RowOrder::swap_halves: return layout_id::rows::swap_halves;
    case RowOrder::cutedsl_w31_interleave64: return layout_id::rows::cutedsl_w31_interleave64;
    case RowOrder::cutedsl_deinterleave_interleave64: return layout_id::rows::cutedsl_deinterleave_interleave64;
  }
  return "?";
}

// Source row of output row r for a tensor of `rows` rows (rows even unless order is identity).
inline uint64_t row_order_source(RowOrder order, uint64_t r, uint64_t rows) {
  const uint64_t half = rows / 2;
  switch (order) {
    case RowOrder::identity: return r;
    case RowOrder::swap_pairs: return r ^ 1u;
    case RowOrder::w3w1_interleave: return (r % 2 == 0) ? half + r / 2 : r / 2;
    case RowOrder::deinterleave_up_first: return r < half ? 2 * r + 1 : 2 * (r - half);
    case RowOrder::swap_halves: return r < half ? r + half : r - half;
    case RowOrder::cutedsl_w31_interleave64:
    case RowOrder::cutedsl_deinterleave_interleave64: {
      // Output row r = 128j + 64h + t takes row h*half + 64j + t of the [up; gate] matrix.
      const uint64_t up_gate = ((r % 128) / 64) * half + (r / 128) * 64 + r % 64;
      return row_order_source(order == RowOrder::cutedsl_w31_interleave64 ? RowOrder::swap_halves : RowOrder::deinterleave_up_first,
                              up_gate, rows);
    }
  }
  return r;
}

// ---- the CUTLASS SM100 128x4 block-scale-factor atom ----------------------------------------------
// Used by vLLM's CUTLASS W4A4 scales (cutlass_sf_128x4.h, with the drawn tile), FlashInfer's
// `block_scale_interleave` (TRT-LLM-gen and CUTLASS) and triton_kernels' BlackwellMXScale.
// Byte offset of scale (m, c) in one expert's slab of 128x4 tiles, `cols_padded` scale columns
// per row after padding (a multiple of 4):
//   tile (m/128, c/4) starts at ((m/128)*(cols_padded/4) + c/4) * 512; inside it row m sits at
//   (m%32)*16 + ((m/32)%4)*4 and column c at c%4.
// The row and column parts add up; visits hoist the row part out of their inner loop.
inline uint64_t sf_128x4_row_offset(uint64_t m, uint64_t cols_padded) {
  return (m / 128) * cols_padded * 128 + (m % 32) * 16 + ((m / 32) % 4) * 4;
}
inline uint64_t sf_128x4_column_offset(uint64_t c) { return (c / 4) * 512 + c % 4; }
inline uint64_t sf_128x4_offset(uint64_t m, uint64_t c, uint64_t cols_padded) {
  return sf_128x4_row_offset(m, cols_padded) + sf_128x4_column_offset(c);
}

}  // namespace moepack::packers
