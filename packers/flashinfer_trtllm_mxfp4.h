// FlashInfer TRT-LLM-gen MXFP4 MoE layouts (vLLM backends FLASHINFER_TRTLLM_MXFP4_BF16 and
// FLASHINFER_TRTLLM_MXFP4_MXFP8; both activation variants get the same bytes).
//
// Upstream definitions followed:
//   vllm-project/vllm : vllm/model_executor/layers/fused_moe/oracle/mxfp4.py @ e9d1398d9
//     `convert_gpt_oss_weight_to_mxfp4_moe_kernel_format` (TRTLLM branch: `swap_every_two_rows`
//     on the interleaved gpt-oss w13, then per expert row shuffles) and
//     `convert_weight_to_mxfp4_moe_kernel_format` (TRTLLM branch: [w1;w3] re-stacked as
//     [w3_0, w1_0, w3_1, w1_1, ...], then the same shuffles)
//   flashinfer-ai/flashinfer : flashinfer/fused_moe/core.py `get_w2_permute_indices_with_cache`,
//     `reorder_rows_for_gated_act_gemm`; flashinfer/utils.py `get_shuffle_matrix_a_row_indices`,
//     `get_shuffle_matrix_sf_a_row_indices`; flashinfer/quantization/fp4_quantization.py
//     `shuffle_matrix_a`, `shuffle_matrix_sf_a`, `block_scale_interleave` (C++:
//     csrc/nv_internal/cpp/kernels/quantization.cu `block_scale_interleave_kernel`) @ v0.6.17
//
// Each tensor is a gather of rows: out[r] = in[pre(S(r))], where pre is the row order vLLM
// applies first (RowOrder, common.h) and S the shuffle of blocks of 32 rows
// (epilogue_tile_m = 128; flashinfer/utils.py `get_shuffle_matrix_a_row_indices`):
//   S(r) = (r/32)*32 + 4*(r%8) + (r%32)/8
//   out rows 0..9 <- in rows 0 4 8 12 16 20 24 28 1 5   (block 32 maps the same way, offset 32)
//
//   gpt-oss w13 (rows=swap_pairs), I = 128 so 256 rows [g0,u0,g1,u1,...]:
//     packed row : 0   1   2   3   4 ...  7   8   9  ... 31 | 32  33 ...
//     S(r)       : 0   4   8  12  16 ... 28   1   5  ... 31 | 32  36 ...
//     source row : 1   5   9  13  17 ... 29   0   4  ... 30 | 33  37 ...   (S(r) XOR 1)
//   generic w13 (rows=w3w1_interleave), I = 128, canonical [w1 (0..127); w3 (128..255)]:
//     source row : 128 130 132 ... 142 0 2 ...                             (even S -> w3, odd S -> w1)
//   w2 (rows=identity): source row = S(r).
//
// Tensors and what the packer expects (one expert, sizes already padded by vLLM: I to 128,
// H to 256, so every row count is a multiple of 128 and every scale row a multiple of 4):
//   weight : U8 [N, K/2] FP4 pairs           -> U8 [N, K/2]; N % 32 == 0
//   scale  : U8 [N, K/32] E8M0               -> rows gathered, then the CUTLASS 128x4 swizzle
//            (sf_128x4_offset, common.h) of the gathered matrix; vLLM views the bytes as float8_e4m3fn
//            [N, K/32], so the packed dtype is F8_E4M3 (the bytes are still E8M0 codes; the
//            `u8` variant, MXFP8's, keeps U8);
//            N % 128 == 0 and (K/32) % 4 == 0, as vLLM's reshape back to [N, K/32] requires
//   bias   : BF16/F16/F32 [N]                -> F32 [N] (vLLM `.to(torch.float32)`), rows gathered
// The row order of w13 tensors must be the checkpoint family's: `swap_pairs` expects gpt-oss'
// interleaved [g0,u0,...], `w3w1_interleave` expects stacked [w1; w3]; w2 uses `identity`.
//
// Per-expert scalars: TrtLlmMxfp4Experts keeps gemm1_alpha / gemm1_beta / gemm1_clamp_limit as
// F32 [E] tensors on the experts object (not layer parameters; vllm/.../experts/trtllm_mxfp4_moe.py
// @ e9d1398d9). `trtllm_mxfp4_gemm1_scalars` builds them for the artifact.
#pragma once

#include <optional>

#include "packers/index_map.h"

namespace moepack::packers {

enum class TrtllmTensor { weight, scale, bias };

// The dtype vLLM keeps the shuffled E8M0 scales in: MXFP4 views them as float8_e4m3fn
// (oracle/mxfp4.py); MXFP8 keeps block_scale_interleave's uint8 (flashinfer_utils.py
// `_shuffle_mxfp8_moe_weights` reshapes the stacked result back to the param's shape, no view),
// named by a `u8` in the id. The bytes are the same.
enum class TrtllmScaleDtype { e4m3_view, u8 };

class FlashinferTrtllmMxfp4Layout final : public IndexMap<FlashinferTrtllmMxfp4Layout> {
 public:
  // Rows per shuffle block for epilogue_tile_m = 128 (flashinfer `get_shuffle_block_size`).
  static constexpr uint64_t kShuffleBlock = 32;

  FlashinferTrtllmMxfp4Layout(TrtllmTensor tensor, RowOrder rows, TrtllmScaleDtype scale_dtype = TrtllmScaleDtype::e4m3_view)
      : tensor_(tensor), rows_(rows), scale_dtype_(scale_dtype) {}

  std::string name() const override;
  DType packed_dtype(DType canonical) const override;
  Accepts accepts() const override;
  Units units(DType canonical) const override;
  void pack(const TensorView& canonical, std::span<uint8_t> packed) const override;  // bulk: weight rows copied whole

  // The canonical row that packed row r comes from (rows = the tensor's row count).
  uint64_t source_row(uint64_t r, uint64_t rows) const {
    const uint64_t shuffled = (r / kShuffleBlock) * kShuffleBlock + (kShuffleBlock / 8) * (r % 8) + (r % kShuffleBlock) / 8;
    return row_order_source(rows_, shuffled, rows);
  }

  // Index map: packed row r gathers canonical row source_row(r); the weight and bias keep the
  // row's bytes (or its one element) in place, the scale puts them in the 128x4 atom.
  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], cols = shape.size() == 2 ? shape[1] : 1;
    for (uint64_t r = 0; r < rows; ++r) {
      const uint64_t source = source_row(r, rows);
      if (tensor_ == TrtllmTensor::scale) {
        const uint64_t row = sf_128x4_row_offset(r, cols);
        for (uint64_t c = 0; c < cols; ++c) fn(source * cols + c, row + sf_128x4_column_offset(c));
      } else {
        for (uint64_t c = 0; c < cols; ++c) fn(source * cols + c, r * cols + c);
      }
    }
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape.begin(), shape.end()}; }

 private:
  TrtllmTensor tensor_;
  RowOrder rows_;
  TrtllmScaleDtype scale_dtype_;
};

// gemm1_alpha, gemm1_beta, gemm1_clamp_limit as vLLM keeps them: F32 [num_experts] each, every
// element the configured value (gpt-oss: 1.702, 1.0, swiglu_limit 7.0); an absent value has no tensor.
struct TrtllmGemm1Scalars {
  std::optional<OwnedTensor> alpha, beta, clamp_limit;
};
TrtllmGemm1Scalars trtllm_mxfp4_gemm1_scalars(uint64_t num_local_experts, std::optional<float> alpha,
                                              std::optional<float> beta, std::optional<float> clamp_limit);

}  // namespace moepack::packers
