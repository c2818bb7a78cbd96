// FlashInfer CUTLASS MXFP4 layouts; the drawn layout and upstream references are in
// flashinfer_cutlass_mxfp4.h.
#include "packers/flashinfer_cutlass_mxfp4.h"

#include <vector>

namespace moepack::packers {
namespace {

// The kernel's own loop: one row pair (n, n+8) and one 32-byte run per (block, partition), two
// bytes written per lane with their nibbles regrouped.
void sm90_interleave(std::span<const uint8_t> in, std::span<uint8_t> out, uint64_t rows, uint64_t row_bytes) {
  for (uint64_t pair = 0; pair < rows / 2; ++pair) {
    const uint64_t n = pair / 8 * 16 + pair % 8;
    for (uint64_t run = 0; run < row_bytes / 32; ++run) {
      for (uint64_t lane = 0; lane < 32; ++lane) {
        const uint8_t a = in[n * row_bytes + 32 * run + lane];
        const uint8_t b = in[(n + 8) * row_bytes + 32 * run + lane];
        const uint64_t dst =
            (n + 8 * ((lane / 8) % 2)) * row_bytes + 32 * run + FlashinferCutlassMxfp4Layout::sm90_lane_column(lane);
        out[dst] = static_cast<uint8_t>((a & 0x0F) | ((b & 0x0F) << 4));
        out[dst + 1] = static_cast<uint8_t>((a >> 4) | (b & 0xF0));
      }
    }
  }
}

}  // namespace

std::string FlashinferCutlassMxfp4Layout::name() const {
  const std::string_view rows = row_order_id(rows_);
  switch (tensor_) {
    case FiCutlassTensor::weight: return layout_id::fi_cutlass_mxfp4_weight(rows);
    case FiCutlassTensor::weight_sm90: return layout_id::fi_interleave_sm90_weights(rows);
    case FiCutlassTensor::scale_128x4: return layout_id::fi_block_scale_interleave(rows);
    case FiCutlassTensor::scale_sm90: return layout_id::fi_interleave_sm90_scales(rows);
    case FiCutlassTensor::bias_bf16: return layout_id::fi_cutlass_bias(rows);
  }
  return "?";
}

DType FlashinferCutlassMxfp4Layout::packed_dtype(DType canonical) const {
  return tensor_ == FiCutlassTensor::bias_bf16 ? DType::BF16 : canonical;
}

Accepts FlashinferCutlassMxfp4Layout::accepts() const {
  Accepts a;
  if (rows_ != RowOrder::identity) {
    a.rows_multiple = 2;
    a.rows_rule = "a gate/up row reorder needs an even row count";
  }
  switch (tensor_) {
    case FiCutlassTensor::weight: break;
    case FiCutlassTensor::weight_sm90:
      a.rows_multiple = 16;
      a.last_multiple = 32;
      a.rows_rule = a.last_rule =
          "the SM90 FP4 interleave kernel covers rows in groups of 16 and K in runs of 64 values (needs N % 16 == 0 and "
          "K % 64 == 0)";
      break;
    case FiCutlassTensor::scale_sm90:
      a.last_multiple = 4;
      a.last_rule = "interleave_moe_scales_for_sm90_mixed_gemm needs (K/32) % 4 == 0";
      break;
    case FiCutlassTensor::scale_128x4:
      a.rows_multiple = 128;
      a.last_multiple = 4;
      a.rows_rule = a.last_rule =
          "vLLM reshapes the 128x4-swizzled scales back to [N, K/32]: needs N % 128 == 0 and (K/32) % 4 == 0";
      break;
    case FiCutlassTensor::bias_bf16:
      a.dtypes = Accepts::Dtypes::float_bias;
      a.ranks = Accepts::rank(1);
      a.what = "one expert's 1-D bias [rows]";
      break;
  }
  return a;
}

Units FlashinferCutlassMxfp4Layout::units(DType canonical) const {
  if (tensor_ == FiCutlassTensor::weight_sm90) return {.canonical_bits = 4, .packed_bits = 4};
  if (tensor_ == FiCutlassTensor::bias_bf16)
    return {.canonical_bits = static_cast<unsigned>(dtype_bits(canonical)), .packed_bits = 16, .converts = true};
  return {};
}

// The weights are the large tensors: rows are gathered whole, then the SM90 form runs the
// kernel's own loop over the reordered rows.
void FlashinferCutlassMxfp4Layout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  if (tensor_ != FiCutlassTensor::weight && tensor_ != FiCutlassTensor::weight_sm90) return pack_by_map(canonical, packed);
  expect_pack_args(canonical, packed);
  const uint64_t rows = canonical.shape[0], cols = canonical.shape[1];
  std::vector<uint8_t> reordered;
  std::span<uint8_t> gathered = packed;
  if (tensor_ == FiCutlassTensor::weight_sm90) {
    reordered.resize(canonical.bytes.size());
    gathered = reordered;
  }
  for (uint64_t r = 0; r < rows; ++r)
    std::memcpy(gathered.data() + r * cols, canonical.bytes.data() + source_row(r, rows) * cols, cols);
  if (tensor_ == FiCutlassTensor::weight_sm90) sm90_interleave(reordered, packed, rows, cols);
}

}  // namespace moepack::packers
