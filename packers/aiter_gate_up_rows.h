// vLLM's gate/up row de-interleave in the gpt-oss converter's AITER_MXFP4_BF16 branch: the
// interleaved w13 rows [g0, u0, g1, u1, ...] become [g0, g1, ...; u0, u1, ...] (gate first),
// the row order AITER's `shuffle_weight_a16w4(..., gate_up=True)` expects.
//
// Upstream definition followed:
//   vllm-project/vllm : vllm/model_executor/layers/fused_moe/oracle/mxfp4.py @ e9d1398d9
//     `convert_gpt_oss_weight_to_mxfp4_moe_kernel_format`, AITER_MXFP4_BF16 branch:
//     w13 weight bytes and w13 scale `.view(E, N/2, 2, C).permute(0, 2, 1, 3)`, then the f32
//     w13 bias `.view(E, N/2, 2).permute(0, 2, 1)` (N = 2I rows). Only this branch; the W4A4 and
//     W4A8 branches of the same converter keep the interleaved rows.
//   The expert axis stays outermost, so one expert's rows are permuted on their own.
//
// Index map (N rows, N even): canonical row r -> packed row (r % 2) * N/2 + r / 2
//   (equivalently packed row h*N/2 + j <- canonical row 2j + h, h = 0 gate, 1 up).
//
// Drawn example, N = 6 (I = 3), rows of any width:
//   canonical rows  0:g0  1:u0  2:g1  3:u1  4:g2  5:u2
//   packed rows     0:g0  1:g1  2:g2  3:u0  4:u1  5:u2     (source rows 0 2 4 1 3 5)
// (FlashInfer CUTLASS's `deinterleave_up_first` in common.h is the same split with
// the halves the other way round.)
//
// Canonical input: one expert's w13 tensor in the row order vLLM's loader holds, I padding
// applied: weight U8 [2I, H/2], scale U8 [2I, H/32], or bias [2I] (vLLM casts the bias to f32
// first: use it as "vllm.bias_f32 | <this>"). Any whole-byte dtype; dtype and shape kept. For
// gpt-oss the rows are interleaved, as the branch assumes; QuarkOCP_MX_MoEMethod sends other
// models' stacked [w1; w3] rows through the same converter, and vLLM permutes them all the
// same, so this layout does too (it reproduces vLLM's bytes; it does not judge them).
#pragma once

#include "packers/index_map.h"

namespace moepack::packers {

class AiterDeinterleaveGateUpRowsLayout final : public IndexMap<AiterDeinterleaveGateUpRowsLayout> {
 public:
  std::string name() const override;
  DType packed_dtype(DType canonical) const override { return canonical; }
  Accepts accepts() const override;
  Units units(DType canonical) const override;
  void pack(const TensorView& canonical, std::span<uint8_t> packed) const override;  // bulk: row copies

  // Index map: the packed row that canonical row r of an N-row tensor goes to.
  static uint64_t packed_row(uint64_t rows, uint64_t r) { return (r % 2) * (rows / 2) + r / 2; }

  // Units are elements; a row's elements move together.
  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], cols = shape.size() == 2 ? shape[1] : 1;
    for (uint64_t r = 0; r < rows; ++r)
      for (uint64_t c = 0; c < cols; ++c) fn(r * cols + c, packed_row(rows, r) * cols + c);
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape.begin(), shape.end()}; }
};

}  // namespace moepack::packers
