// FlashInfer TRT-LLM-gen MXFP4 row shuffles; the drawn layout and upstream references are in
// flashinfer_trtllm_mxfp4.h.
#include "packers/flashinfer_trtllm_mxfp4.h"

namespace moepack::packers {

std::string FlashinferTrtllmMxfp4Layout::name() const {
  const std::string_view rows = row_order_id(rows_);
  switch (tensor_) {
    case TrtllmTensor::weight: return layout_id::fi_trtllm_shuffle_matrix_a(rows);
    case TrtllmTensor::scale: return layout_id::fi_trtllm_shuffle_matrix_sf_a(rows, scale_dtype_ == TrtllmScaleDtype::u8);
    case TrtllmTensor::bias: return layout_id::fi_trtllm_shuffle_bias(rows);
  }
  return "?";
}

DType FlashinferTrtllmMxfp4Layout::packed_dtype(DType canonical) const {
  switch (tensor_) {
    case TrtllmTensor::weight: return canonical;
    case TrtllmTensor::scale:  // MXFP4: vLLM's `.view(torch.float8_e4m3fn)`; MXFP8: uint8 as shuffled
      return scale_dtype_ == TrtllmScaleDtype::u8 ? DType::U8 : DType::F8_E4M3;
    case TrtllmTensor::bias: return DType::F32;
  }
  return canonical;
}

Accepts FlashinferTrtllmMxfp4Layout::accepts() const {
  Accepts a;
  a.rows_multiple = kShuffleBlock;
  a.rows_rule = "shuffle_matrix_a with epilogue_tile_m=128 needs rows % 32 == 0";
  if (tensor_ == TrtllmTensor::bias) {
    a.dtypes = Accepts::Dtypes::float_bias;
    a.ranks = Accepts::rank(1);
    a.what = "one expert's 1-D bias [rows]";
  }
  if (tensor_ == TrtllmTensor::scale) {
    a.rows_multiple = 128;
    a.rows_rule = a.last_rule =
        "shuffle_matrix_sf_a needs rows % 128 == 0, and vLLM's reshape of the 128x4-swizzled scales back to [N, K/32] "
        "needs (K/32) % 4 == 0";
    a.last_multiple = 4;
  }
  return a;
}

Units FlashinferTrtllmMxfp4Layout::units(DType canonical) const {
  if (tensor_ != TrtllmTensor::bias) return {};
  return {.canonical_bits = static_cast<unsigned>(dtype_bits(canonical)), .packed_bits = 32, .converts = true};
}

void FlashinferTrtllmMxfp4Layout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  if (tensor_ != TrtllmTensor::weight) return pack_by_map(canonical, packed);
  expect_pack_args(canonical, packed);
  const uint64_t rows = canonical.shape[0], cols = canonical.shape[1];
  for (uint64_t r = 0; r < rows; ++r)
    std::memcpy(packed.data() + r * cols, canonical.bytes.data() + source_row(r, rows) * cols, cols);
}

TrtllmGemm1Scalars trtllm_mxfp4_gemm1_scalars(uint64_t num_local_experts, std::optional<float> alpha,
                                              std::optional<float> beta, std::optional<float> clamp_limit) {
  auto filled = [num_local_experts](std::optional<float> value) -> std::optional<OwnedTensor> {
    if (!value) return std::nullopt;
    OwnedTensor t(DType::F32, {num_local_experts});
    for (uint64_t e = 0; e < num_local_experts; ++e) std::memcpy(t.bytes.data() + 4 * e, &*value, 4);
    return t;
  };
  return {filled(alpha), filled(beta), filled(clamp_limit)};
}

}  // namespace moepack::packers
