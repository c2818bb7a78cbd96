#include "lib/experts/fp8_dequant.h"

#include "lib/core/codecs.h"
#include "lib/core/error.h"

namespace moepack::experts {

std::vector<float> dequantize_fp8(const OwnedTensor& weight, std::span<const float> scales, uint64_t rows, uint64_t cols, uint64_t block_rows,
                                  uint64_t block_cols, float multiplier, const std::string& where) {
  if ((weight.dtype != DType::F8_E4M3 && weight.dtype != DType::F8_E4M3FNUZ && weight.dtype != DType::I8) || weight.bytes.size() != rows * cols)
    throw Error(ErrorKind::bad_input, where + ": 8-bit weight must be F8_E4M3, F8_E4M3FNUZ or I8 [" + std::to_string(rows) + ", " + std::to_string(cols) + "], got " +
                                          std::string(dtype_name(weight.dtype)) + " " + shape_string(weight.shape));
  if (block_rows == 0 || block_cols == 0) throw_internal("dequantize_fp8: empty block");
  const uint64_t grid_rows = (rows + block_rows - 1) / block_rows, grid_cols = (cols + block_cols - 1) / block_cols;
  if (scales.size() != grid_rows * grid_cols)
    throw Error(ErrorKind::bad_input, where + ": " + std::to_string(scales.size()) + " FP8 scales for a " + std::to_string(grid_rows) + " x " +
                                          std::to_string(grid_cols) + " grid of " + std::to_string(block_rows) + " x " + std::to_string(block_cols) + " blocks");
  float lut[256];
  for (int c = 0; c < 256; ++c)
    lut[c] = weight.dtype == DType::I8            ? static_cast<float>(static_cast<int8_t>(c))
             : weight.dtype == DType::F8_E4M3FNUZ ? e4m3fnuz_to_float(static_cast<uint8_t>(c))
                                                  : e4m3_to_float(static_cast<uint8_t>(c));
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (uint64_t r = 0; r < rows; ++r) {
    const float* srow = scales.data() + (r / block_rows) * grid_cols;
    for (uint64_t c = 0; c < cols; ++c) out[r * cols + c] = lut[weight.bytes[r * cols + c]] * (srow[c / block_cols] * multiplier);
  }
  return out;
}

}  // namespace moepack::experts
