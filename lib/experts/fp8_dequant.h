// FP8 E4M3 weights with float scales over rectangular blocks, as vLLM's FP8 MoE methods hold
// them (fp32 scale parameters):
//   per-tensor   one scale for the whole [N, K] weight (w13 after vLLM's requantization)
//   per-shard    the checkpoint's [w1, w3] scales of a per-tensor w13: blocks of N/2 rows
//   per-channel  [N, 1]: one scale per output row
//   block        [ceil(N/bn), ceil(K/bk)] (DeepSeek-style 128 x 128)
//   value(r, c) = e4m3(w[r, c]) * scale[r / block_rows][c / block_cols] * multiplier
// INT8 W8A8 weights (I8, per-channel scales) take the same rule with the int8 value of w[r, c].
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lib/core/tensor.h"

namespace moepack::experts {

// One expert's weight [rows, cols] as floats. `scales` holds ceil(rows/block_rows) x
// ceil(cols/block_cols) values, row-major. Error(bad_input) naming `where` when the weight is
// not F8_E4M3, F8_E4M3FNUZ (MI300's normalized FP8) or I8 of that shape or the scales do not cover it.
std::vector<float> dequantize_fp8(const OwnedTensor& weight, std::span<const float> scales, uint64_t rows, uint64_t cols, uint64_t block_rows,
                                  uint64_t block_cols, float multiplier, const std::string& where);

}  // namespace moepack::experts
