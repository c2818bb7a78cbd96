// FlashInfer CUTLASS MXFP4 layouts; the drawn layout and upstream references are in
// flashinfer_cutlass_mxfp4.h.
#include "packers/flashinfer_cutlass_mxfp4.h"

#include "packers/cutlass_sf_128x4.h"

namespace moepack::packers {

namespace {

// Packed-byte column of lane l inside its 32-byte run (the kernel's interleaved lane id).
uint64_t sm90_lane_column(uint64_t lane) { return 16 * (lane / 16) + 4 * (lane % 4) + 2 * ((lane % 8) / 4); }

// The kernel's own loop: one row pair (n, n+8) and one 32-byte run per (block, partition), two
// bytes written per lane with their nibbles regrouped.
void sm90_interleave(std::span<const uint8_t> in, std::span<uint8_t> out, uint64_t rows, uint64_t row_bytes) {
  for (uint64_t pair = 0; pair < rows / 2; ++pair) {
    const uint64_t n = pair / 8 * 16 + pair % 8;
    for (uint64_t run = 0; run < row_bytes / 32; ++run) {
      for (uint64_t lane = 0; lane < 32; ++lane) {
        const uint8_t a = in[n * row_bytes + 32 * run + lane];
        const uint8_t b = in[(n + 8) * row_bytes + 32 * run + lane];
        const uint64_t dst = (n + 8 * ((lane / 8) % 2)) * row_bytes + 32 * run + sm90_lane_column(lane);
        out[dst] = static_cast<uint8_t>((a & 0x0F) | ((b & 0x0F) << 4));
        out[dst + 1] = static_cast<uint8_t>((a >> 4) | (b & 0xF0));
      }
    }
  }
}

void sm90_deinterleave(std::span<const uint8_t> out, std::span<uint8_t> in, uint64_t rows, uint64_t row_bytes) {
  for (uint64_t pair = 0; pair < rows / 2; ++pair) {
    const uint64_t n = pair / 8 * 16 + pair % 8;
    for (uint64_t run = 0; run < row_bytes / 32; ++run) {
      for (uint64_t lane = 0; lane < 32; ++lane) {
        const uint64_t src = (n + 8 * ((lane / 8) % 2)) * row_bytes + 32 * run + sm90_lane_column(lane);
        const uint8_t lo_pair = out[src];      // a.lo | b.lo << 4
        const uint8_t hi_pair = out[src + 1];  // a.hi | b.hi << 4
        in[n * row_bytes + 32 * run + lane] = static_cast<uint8_t>((lo_pair & 0x0F) | ((hi_pair & 0x0F) << 4));
        in[(n + 8) * row_bytes + 32 * run + lane] = static_cast<uint8_t>((lo_pair >> 4) | (hi_pair & 0xF0));
      }
    }
  }
}

}  // namespace

std::string FlashinferCutlassMxfp4Layout::name() const {
  const std::string rows = "rows=" + std::string(fi_detail::row_order_id(rows_));
  const std::string version = std::string(fi_detail::kFlashInferVersion);
  switch (tensor_) {
    case FiCutlassTensor::weight: return "flashinfer.cutlass_mxfp4_weight(" + rows + "," + version + ")";
    case FiCutlassTensor::weight_sm90:
      return "flashinfer.interleave_moe_weights_for_sm90_mixed_gemm(" + rows + ",fp4," + version + ")";
    case FiCutlassTensor::scale_128x4: return "flashinfer.block_scale_interleave(" + rows + ",sf=128x4," + version + ")";
    case FiCutlassTensor::scale_sm90:
      return "flashinfer.interleave_moe_scales_for_sm90_mixed_gemm(" + rows + ",group_size=32," + version + ")";
    case FiCutlassTensor::bias_bf16: return "flashinfer.cutlass_bias(" + rows + ",bf16," + version + ")";
  }
  return "?";
}

DType FlashinferCutlassMxfp4Layout::packed_dtype(DType canonical) const {
  return tensor_ == FiCutlassTensor::bias_bf16 ? DType::BF16 : canonical;
}

uint64_t FlashinferCutlassMxfp4Layout::check_shape(DType dtype, std::span<const uint64_t> shape) const {
  uint64_t rows = 0;
  if (tensor_ == FiCutlassTensor::bias_bf16) {
    rows = fi_detail::expect_bias_vector(name(), dtype, shape);
  } else {
    const fi_detail::ByteMatrix m = fi_detail::expect_byte_matrix(name(), dtype, shape);
    rows = m.rows;
    if (tensor_ == FiCutlassTensor::weight_sm90 && (m.rows % 16 != 0 || m.cols % 32 != 0))
      fi_detail::refuse(name(), shape,
                        "the SM90 FP4 interleave kernel covers rows in groups of 16 and K in runs of 64 values "
                        "(needs N % 16 == 0 and K % 64 == 0)");
    if (tensor_ == FiCutlassTensor::scale_sm90 && m.cols % 4 != 0)
      fi_detail::refuse(name(), shape, "interleave_moe_scales_for_sm90_mixed_gemm needs (K/32) % 4 == 0");
    if (tensor_ == FiCutlassTensor::scale_128x4 && (m.rows % 128 != 0 || m.cols % 4 != 0))
      fi_detail::refuse(name(), shape,
                        "vLLM reshapes the 128x4-swizzled scales back to [N, K/32]: needs N % 128 == 0 and "
                        "(K/32) % 4 == 0");
  }
  if (rows_ != fi_detail::RowOrder::identity && rows % 2 != 0)
    fi_detail::refuse(name(), shape, "a gate/up row reorder needs an even row count");
  return rows;
}

std::vector<uint64_t> FlashinferCutlassMxfp4Layout::row_sources(uint64_t rows) const {
  std::vector<uint64_t> sources(rows);
  for (uint64_t r = 0; r < rows; ++r) sources[r] = source_row(r, rows);
  return sources;
}

FlashinferCutlassMxfp4Layout::NibblePosition FlashinferCutlassMxfp4Layout::sm90_weight_position(uint64_t n, uint64_t k,
                                                                                                  uint64_t k_elems) {
  const uint64_t row_bytes = k_elems / 2;
  const uint64_t c = k / 2;
  const uint64_t lane = c % 32;
  const uint64_t row = 16 * (n / 16) + n % 8 + 8 * ((lane / 8) % 2);
  return {row * row_bytes + 32 * (c / 32) + sm90_lane_column(lane) + k % 2, static_cast<unsigned>((n % 16) / 8)};
}

std::vector<uint64_t> FlashinferCutlassMxfp4Layout::packed_shape(std::span<const uint64_t> canonical_shape) const {
  const DType probe = tensor_ == FiCutlassTensor::bias_bf16 ? DType::BF16 : DType::U8;
  const uint64_t rows = check_shape(probe, canonical_shape);
  if (tensor_ == FiCutlassTensor::scale_sm90) return {canonical_shape[1] / 4, 4 * rows};
  return {canonical_shape.begin(), canonical_shape.end()};
}

void FlashinferCutlassMxfp4Layout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  const uint64_t rows = check_shape(canonical.dtype, canonical.shape);
  fi_detail::expect_buffer(name(), "canonical", canonical.bytes.size(), byte_size(canonical.dtype, canonical.shape));
  fi_detail::expect_buffer(name(), "packed", packed.size(), byte_size(packed_dtype(canonical.dtype), packed_shape(canonical.shape)));
  const std::vector<uint64_t> sources = row_sources(rows);
  if (tensor_ == FiCutlassTensor::bias_bf16) {
    for (uint64_t r = 0; r < rows; ++r)
      fi_detail::cast_element(canonical.dtype, canonical.bytes, sources[r], DType::BF16, packed, r);
    return;
  }
  const uint64_t cols = canonical.shape[1];
  if (tensor_ == FiCutlassTensor::scale_128x4) {
    sf_128x4_swizzle(canonical.bytes, packed, rows, cols, sources);
    return;
  }
  if (tensor_ == FiCutlassTensor::weight) {
    fi_detail::gather_rows(canonical.bytes, packed, sources, cols);
    return;
  }
  std::vector<uint8_t> reordered(canonical.bytes.size());
  fi_detail::gather_rows(canonical.bytes, reordered, sources, cols);
  if (tensor_ == FiCutlassTensor::weight_sm90) {
    sm90_interleave(reordered, packed, rows, cols);
  } else {  // scale_sm90: rows of 4 scales land side by side, row after row
    for (uint64_t n = 0; n < rows; ++n)
      for (uint64_t j = 0; j < cols / 4; ++j)
        for (uint64_t q = 0; q < 4; ++q) packed[j * 4 * rows + 4 * n + q] = reordered[n * cols + 4 * j + q];
  }
}

void FlashinferCutlassMxfp4Layout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  const uint64_t rows = check_shape(canonical.dtype, canonical.shape);
  fi_detail::expect_buffer(name(), "canonical", canonical.bytes.size(), byte_size(canonical.dtype, canonical.shape));
  fi_detail::expect_buffer(name(), "packed", packed.size(), byte_size(packed_dtype(canonical.dtype), packed_shape(canonical.shape)));
  const std::vector<uint64_t> sources = row_sources(rows);
  if (tensor_ == FiCutlassTensor::bias_bf16) {
    // Exact only for a BF16 canonical bias; wider biases were rounded by the cast.
    for (uint64_t r = 0; r < rows; ++r)
      fi_detail::cast_element(DType::BF16, packed, r, canonical.dtype, canonical.bytes, sources[r]);
    return;
  }
  const uint64_t cols = canonical.shape[1];
  if (tensor_ == FiCutlassTensor::scale_128x4) {
    sf_128x4_unswizzle(packed, canonical.bytes, rows, cols, sources);
    return;
  }
  if (tensor_ == FiCutlassTensor::weight) {
    fi_detail::scatter_rows(packed, canonical.bytes, sources, cols);
    return;
  }
  std::vector<uint8_t> reordered(canonical.bytes.size());
  if (tensor_ == FiCutlassTensor::weight_sm90) {
    sm90_deinterleave(packed, reordered, rows, cols);
  } else {
    for (uint64_t n = 0; n < rows; ++n)
      for (uint64_t j = 0; j < cols / 4; ++j)
        for (uint64_t q = 0; q < 4; ++q) reordered[n * cols + 4 * j + q] = packed[j * 4 * rows + 4 * n + q];
  }
  fi_detail::scatter_rows(reordered, canonical.bytes, sources, cols);
}

}  // namespace moepack::packers
