// See flashinfer_trtllm_bf16.h for the drawn layouts and the upstream definitions.
#include "packers/flashinfer_trtllm_bf16.h"

namespace moepack::packers {

template <>
std::string FlashinferTrtllmBf16Layout::name() const {
  return layout_id::fi_trtllm_bf16_block_major_k(row_order_id(rows_));
}

template <>
Accepts FlashinferTrtllmBf16Layout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::bf16;
  a.what = "one expert's 2-D BF16 weight [N, K]";
  a.rows_multiple = kShuffleBlock;
  a.rows_rule = "the row shuffle (epilogue_tile_m 128) needs the rows to be a multiple of 32";
  a.last_multiple = kBlockK;
  a.last_rule = "the block layout (block_k 128 bytes) needs the columns to be a multiple of 64 bf16";
  return a;
}

template <>
std::string FlashinferTrtllmFp8BlockLayout::name() const {
  return layout_id::fi_trtllm_fp8_block_major_k(row_order_id(rows_));
}

template <>
Accepts FlashinferTrtllmFp8BlockLayout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::one_byte;
  a.what = "one expert's 2-D F8_E4M3 weight [N, K]";
  a.rows_multiple = kShuffleBlock;
  a.rows_rule = "the row shuffle (epilogue_tile_m 64) needs the rows to be a multiple of 16";
  a.last_multiple = kBlockK;
  a.last_rule = "the block layout (block_k 128) needs the columns to be a multiple of 128";
  return a;
}

template <BlockMajorKElement E>
void FlashinferTrtllmBlockMajorKLayout<E>::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  this->expect_pack_args(canonical, packed);
  const uint64_t rows = canonical.shape[0], cols = canonical.shape[1], run = kBlockK * kElementBytes;
  for (uint64_t r = 0; r < rows; ++r) {
    const uint8_t* src = canonical.bytes.data() + source_row(r, rows) * cols * kElementBytes;
    for (uint64_t kb = 0; kb < cols / kBlockK; ++kb) std::memcpy(packed.data() + (kb * rows + r) * run, src + kb * run, run);
  }
}

template class FlashinferTrtllmBlockMajorKLayout<BlockMajorKElement::bf16>;
template class FlashinferTrtllmBlockMajorKLayout<BlockMajorKElement::fp8>;

}  // namespace moepack::packers
