// Building blocks shared by the FlashInfer (TRT-LLM-gen and CUTLASS), vLLM-CUTLASS, Marlin and
// DeepGEMM MXFP4 packers: the w13 row orders vLLM produces before a backend's own shuffle, the
// TRT-LLM-gen `shuffle_matrix_a` row map, row-gather helpers, bias element conversion and the
// refusal messages.
//
// Every row order is written as a gather, out[r] = in[source_row(r)], over ONE expert's rows
// (the w13 tensor holds 2I rows, I = padded intermediate size per partition):
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
//
// TRT-LLM-gen row shuffle (flashinfer-ai/flashinfer : flashinfer/utils.py
// `get_shuffle_matrix_a_row_indices` @ v0.6.17, epilogue_tile_m = 128 -> blocks of 32 rows):
//   within each block of 32 rows, out[r] = in[4*(r%8) + (r%32)/8]
//   out rows 0..9 <- in rows 0 4 8 12 16 20 24 28 1 5   (block 32 maps the same way, offset 32)
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lib/core/codecs.h"
#include "lib/core/error.h"
#include "lib/core/tensor.h"

namespace moepack::packers::fi_detail {

inline constexpr std::string_view kFlashInferVersion = "v0.6.17";
inline constexpr std::string_view kVllmCommit = "e9d1398d9";

enum class RowOrder { identity, swap_pairs, w3w1_interleave, deinterleave_up_first, swap_halves };

inline std::string_view row_order_id(RowOrder order) {
  switch (order) {
    case RowOrder::identity: return "identity";
    case RowOrder::swap_pairs: return "swap_pairs";
    case RowOrder::w3w1_interleave: return "w3w1_interleave";
    case RowOrder::deinterleave_up_first: return "deinterleave_up_first";
    case RowOrder::swap_halves: return "swap_halves";
  }
  return "?";
}

// Source row of output row r for a tensor of `rows` rows (rows even unless order is identity).
inline uint64_t source_row(RowOrder order, uint64_t r, uint64_t rows) {
  const uint64_t half = rows / 2;
  switch (order) {
    case RowOrder::identity: return r;
    case RowOrder::swap_pairs: return r ^ 1u;
    case RowOrder::w3w1_interleave: return (r % 2 == 0) ? half + r / 2 : r / 2;
    case RowOrder::deinterleave_up_first: return r < half ? 2 * r + 1 : 2 * (r - half);
    case RowOrder::swap_halves: return r < half ? r + half : r - half;
  }
  return r;
}

// TRT-LLM-gen shuffle block for epilogue_tile_m = 128 (flashinfer `get_shuffle_block_size`).
inline constexpr uint64_t kTrtllmShuffleBlock = 32;

inline uint64_t trtllm_shuffle_source_row(uint64_t r) {
  const uint64_t b = kTrtllmShuffleBlock;
  return (r / b) * b + (b / 8) * (r % 8) + (r % b) / 8;
}

[[noreturn]] inline void refuse(std::string_view layout, std::span<const uint64_t> shape, const std::string& rule) {
  throw Error(ErrorKind::bad_input, std::string(layout) + ": canonical shape " + shape_string(shape) + " refused: " + rule);
}

inline void expect_buffer(std::string_view layout, std::string_view what, uint64_t have, uint64_t want) {
  if (have != want)
    throw_internal(std::string(layout) + ": " + std::string(what) + " buffer has " + std::to_string(have) +
                   " bytes, expected " + std::to_string(want));
}

// One expert's [rows, cols] tensor of a one-byte dtype (FP4 pairs or E8M0 bytes).
struct ByteMatrix {
  uint64_t rows = 0;
  uint64_t cols = 0;
};

inline ByteMatrix expect_byte_matrix(std::string_view layout, DType dtype, std::span<const uint64_t> shape) {
  if (dtype_bits(dtype) != 8)
    refuse(layout, shape, "expects a one-byte dtype (U8 FP4 pairs or E8M0 bytes), got " + std::string(dtype_name(dtype)));
  if (shape.size() != 2) refuse(layout, shape, "expects one expert's 2-D tensor [rows, cols]");
  if (shape[0] == 0 || shape[1] == 0) refuse(layout, shape, "empty tensor");
  return {shape[0], shape[1]};
}

// out row r = in row source[r], `row_bytes` bytes each.
inline void gather_rows(std::span<const uint8_t> in, std::span<uint8_t> out, const std::vector<uint64_t>& source,
                        uint64_t row_bytes) {
  for (size_t r = 0; r < source.size(); ++r)
    std::memcpy(out.data() + r * row_bytes, in.data() + source[r] * row_bytes, static_cast<size_t>(row_bytes));
}
// Inverse of gather_rows: in row source[r] = out row r.
inline void scatter_rows(std::span<const uint8_t> out, std::span<uint8_t> in, const std::vector<uint64_t>& source,
                         uint64_t row_bytes) {
  for (size_t r = 0; r < source.size(); ++r)
    std::memcpy(in.data() + source[r] * row_bytes, out.data() + r * row_bytes, static_cast<size_t>(row_bytes));
}

// ---- bias elements: vLLM casts biases (`.to(torch.float32)`, `.to(torch.bfloat16)`) ----------
inline bool is_bias_dtype(DType t) { return t == DType::BF16 || t == DType::F16 || t == DType::F32; }

inline float load_float(DType t, std::span<const uint8_t> bytes, uint64_t i) {
  if (t == DType::F32) {
    float v;
    std::memcpy(&v, bytes.data() + 4 * i, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, bytes.data() + 2 * i, 2);
  return t == DType::BF16 ? bf16_to_float(h) : f16_to_float(h);
}

// Casts like torch's `.to(dtype)`: round to nearest even.
inline void store_float(DType t, std::span<uint8_t> bytes, uint64_t i, float v) {
  if (t == DType::F32) {
    std::memcpy(bytes.data() + 4 * i, &v, 4);
    return;
  }
  const uint16_t h = t == DType::BF16 ? float_to_bf16(v) : float_to_f16(v);
  std::memcpy(bytes.data() + 2 * i, &h, 2);
}

// Element i of `src` (dtype `from`) to element j of `dst` (dtype `to`). The same dtype is a
// copy of the bits, as torch leaves a tensor already in the target dtype: a round trip through
// float would quiet signalling NaNs and change their bits in the artifact.
inline void cast_element(DType from, std::span<const uint8_t> src, uint64_t i, DType to, std::span<uint8_t> dst, uint64_t j) {
  if (from == to) {
    const size_t width = static_cast<size_t>(dtype_bits(to) / 8);
    std::memcpy(dst.data() + width * j, src.data() + width * i, width);
    return;
  }
  store_float(to, dst, j, load_float(from, src, i));
}

// A 1-D per-expert bias [rows] of BF16, F16 or F32.
inline uint64_t expect_bias_vector(std::string_view layout, DType dtype, std::span<const uint64_t> shape) {
  if (!is_bias_dtype(dtype))
    refuse(layout, shape, "expects a BF16, F16 or F32 bias, got " + std::string(dtype_name(dtype)));
  if (shape.size() != 1 || shape[0] == 0) refuse(layout, shape, "expects one expert's 1-D bias [rows]");
  return shape[0];
}

}  // namespace moepack::packers::fi_detail
