// FlashInfer TRT-LLM-gen MXFP4 row shuffles; the drawn layout and upstream references are in
// flashinfer_trtllm_mxfp4.h.
#include "packers/flashinfer_trtllm_mxfp4.h"

#include <cstring>

#include "packers/cutlass_sf_128x4.h"

namespace moepack::packers {

using fi_detail::RowOrder;

std::string FlashinferTrtllmMxfp4Layout::name() const {
  const std::string rows = "rows=" + std::string(fi_detail::row_order_id(rows_));
  const std::string version = std::string(fi_detail::kFlashInferVersion);
  switch (tensor_) {
    case TrtllmTensor::weight:
      return "flashinfer.trtllm_shuffle_matrix_a(" + rows + ",epilogue_tile_m=128," + version + ")";
    case TrtllmTensor::scale:
      return "flashinfer.trtllm_shuffle_matrix_sf_a(" + rows + ",epilogue_tile_m=128,sf=128x4," + version + ")";
    case TrtllmTensor::bias:
      return "flashinfer.trtllm_shuffle_bias(" + rows + ",epilogue_tile_m=128,f32," + version + ")";
  }
  return "?";
}

DType FlashinferTrtllmMxfp4Layout::packed_dtype(DType canonical) const {
  switch (tensor_) {
    case TrtllmTensor::weight: return canonical;
    case TrtllmTensor::scale: return DType::F8_E4M3;  // vLLM's `.view(torch.float8_e4m3fn)`
    case TrtllmTensor::bias: return DType::F32;
  }
  return canonical;
}

// Returns the row count after checking the rules of this tensor kind.
uint64_t FlashinferTrtllmMxfp4Layout::check_shape(DType dtype, std::span<const uint64_t> shape) const {
  uint64_t rows = 0;
  if (tensor_ == TrtllmTensor::bias) {
    rows = fi_detail::expect_bias_vector(name(), dtype, shape);
  } else {
    const fi_detail::ByteMatrix m = fi_detail::expect_byte_matrix(name(), dtype, shape);
    rows = m.rows;
    if (tensor_ == TrtllmTensor::scale && (m.rows % 128 != 0 || m.cols % 4 != 0))
      fi_detail::refuse(name(), shape,
                        "shuffle_matrix_sf_a needs rows % 128 == 0, and vLLM's reshape of the 128x4-swizzled "
                        "scales back to [N, K/32] needs (K/32) % 4 == 0");
  }
  if (rows % fi_detail::kTrtllmShuffleBlock != 0)
    fi_detail::refuse(name(), shape, "shuffle_matrix_a with epilogue_tile_m=128 needs rows % 32 == 0");
  return rows;
}

uint64_t FlashinferTrtllmMxfp4Layout::source_row(uint64_t r, uint64_t rows) const {
  return fi_detail::source_row(rows_, fi_detail::trtllm_shuffle_source_row(r), rows);
}

std::vector<uint64_t> FlashinferTrtllmMxfp4Layout::row_sources(uint64_t rows) const {
  std::vector<uint64_t> sources(rows);
  for (uint64_t r = 0; r < rows; ++r) sources[r] = source_row(r, rows);
  return sources;
}

std::vector<uint64_t> FlashinferTrtllmMxfp4Layout::packed_shape(std::span<const uint64_t> canonical_shape) const {
  const DType probe = tensor_ == TrtllmTensor::bias ? DType::F32 : DType::U8;
  check_shape(probe, canonical_shape);
  return {canonical_shape.begin(), canonical_shape.end()};
}

void FlashinferTrtllmMxfp4Layout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  const uint64_t rows = check_shape(canonical.dtype, canonical.shape);
  const std::vector<uint64_t> sources = row_sources(rows);
  fi_detail::expect_buffer(name(), "canonical", canonical.bytes.size(), byte_size(canonical.dtype, canonical.shape));
  fi_detail::expect_buffer(name(), "packed", packed.size(), byte_size(packed_dtype(canonical.dtype), canonical.shape));
  switch (tensor_) {
    case TrtllmTensor::weight:
      fi_detail::gather_rows(canonical.bytes, packed, sources, canonical.shape[1]);
      break;
    case TrtllmTensor::scale:
      sf_128x4_swizzle(canonical.bytes, packed, rows, canonical.shape[1], sources);
      break;
    case TrtllmTensor::bias:
      for (uint64_t r = 0; r < rows; ++r)
        fi_detail::cast_element(canonical.dtype, canonical.bytes, sources[r], DType::F32, packed, r);
      break;
  }
}

void FlashinferTrtllmMxfp4Layout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  const uint64_t rows = check_shape(canonical.dtype, canonical.shape);
  const std::vector<uint64_t> sources = row_sources(rows);
  fi_detail::expect_buffer(name(), "canonical", canonical.bytes.size(), byte_size(canonical.dtype, canonical.shape));
  fi_detail::expect_buffer(name(), "packed", packed.size(), byte_size(packed_dtype(canonical.dtype), canonical.shape));
  switch (tensor_) {
    case TrtllmTensor::weight:
      fi_detail::scatter_rows(packed, canonical.bytes, sources, canonical.shape[1]);
      break;
    case TrtllmTensor::scale:
      sf_128x4_unswizzle(packed, canonical.bytes, rows, canonical.shape[1], sources);
      break;
    case TrtllmTensor::bias:
      // Exact for BF16/F16/F32 canonical biases: every such value is an F32.
      for (uint64_t r = 0; r < rows; ++r)
        fi_detail::cast_element(DType::F32, packed, r, canonical.dtype, canonical.bytes, sources[r]);
      break;
  }
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
