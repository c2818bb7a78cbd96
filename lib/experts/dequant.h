// One table of weight formats, each with the exact rule that turns one expert's canonical
// tensor (what vLLM's loader holds, docs/ARCHITECTURE.md) into float values. The reference experts,
// the emulation of packed layouts and the tests all dequantize through it, so a format is
// defined once.
//
//   format        weight storage (one row)                     scale (one row)          value
//   mxfp4         U8, 2 E2M1 codes per byte, low nibble first  U8 E8M0, 1 per 32        e2m1 · 2^(s-127)
//   mxfp6_e3m2    U8, 4 codes per 3 bytes (bit stream, LSB)    U8 E8M0, 1 per 32        e3m2 · 2^(s-127)
//   mxfp6_e2m3    same packing as e3m2                         U8 E8M0, 1 per 32        e2m3 · 2^(s-127)
//   mxfp8         F8_E4M3, 1 per byte                          U8 E8M0, 1 per 32        e4m3 · 2^(s-127)
//   nvfp4         U8, 2 E2M1 codes per byte                    F8_E4M3, 1 per 16        e2m1 · e4m3(s) · global
//   bf16/f16/f32  the float itself                             none                     value
//   int_wna16     GPTQ / AWQ / compressed-tensors integer codes: lib/experts/int_dequant.h
//   fp8_e4m3      F8_E4M3 (or MI300's F8_E4M3FNUZ) with fp32 scales per tensor, shard, channel or block: fp8_dequant.h
//   int8          I8 with fp32 per-channel scales (W8A8): fp8_dequant.h as well
//   w4a8_fp8      I32 [N, K/8] uint4b8 codes (N first, code k%8   a 16-value table per       table[code]
//                 of word (n, k/8)), CUTLASS W4A8              group: int_dequant.h
// (OCP MX v1.0 for the MX formats; NVFP4 as ModelOpt and compressed-tensors define it, with the
// global factor as a multiplier: compressed-tensors' weight_global_scale is its reciprocal.)
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/core/tensor.h"

namespace moepack::experts {

enum class WeightFormat { mxfp4, mxfp6_e3m2, mxfp6_e2m3, mxfp8, nvfp4, float16or32, int_wna16, fp8_e4m3, int8, w4a8_fp8 };

struct FormatInfo {
  WeightFormat format;
  std::string_view name;
  // Logical elements held by `storage_units` bytes of a row (2 per byte for FP4, 4 per 3 for FP6).
  uint64_t elements_per_group;
  uint64_t bytes_per_group;
  uint64_t block;  // elements per scale; 0 = no block scale
};
const FormatInfo& format_info(WeightFormat f);

// The weight format of a layer from what the manifest and readers say: the oracle family and the
// weight QuantKey name ("kMxfp4Static", "kMxfp6E3M2Static", "kNvfp4Static", ...), or a float
// dtype for unquantized layers. nullopt: a format these experts cannot run yet.
std::optional<WeightFormat> weight_format_of(std::string_view family, std::string_view weight_key);

// One expert's weight [rows, cols] in float, row-major. `weight` holds `rows` rows of the format's
// storage for `cols` logical elements; `block_scale` is [rows, cols / block] (ignored for floats);
// `global_multiplier` scales everything (NVFP4's second level; 1 otherwise).
// Throws Error(bad_input) when the storage does not match the shapes.
std::vector<float> dequantize(WeightFormat format, const OwnedTensor& weight, const OwnedTensor* block_scale, uint64_t rows, uint64_t cols,
                              float global_multiplier = 1.0f);

// The same values a block of rows at a time, for the reference experts' dot products: the rows
// they are about to read are decoded into the cache instead of the whole matrix into memory
// (an expert of a large model is 100 MB and more in float). Takes the block-scaled coded formats
// (MX, NVFP4) and floats; the storage is checked once, here, as dequantize checks it (Error
// bad_input), and decode() then gives exactly dequantize's values.
class RowDequantizer {
 public:
  RowDequantizer(WeightFormat format, OwnedTensor weight, std::optional<OwnedTensor> block_scale, uint64_t rows, uint64_t cols,
                 float global_multiplier = 1.0f);
  // Whether `format` can be decoded by rows (the others dequantize whole: int_dequant.h, fp8_dequant.h).
  static bool takes(WeightFormat format);
  uint64_t rows() const { return rows_; }
  uint64_t cols() const { return cols_; }
  // Rows [first_row, first_row + count) into out[count * cols], row-major.
  void decode(uint64_t first_row, uint64_t count, float* out) const;
  // The same values column-interleaved: row first_row + i, column k at out[k * count + i], so
  // the values of `count` rows at one column are contiguous (the dot products read them so).
  void decode_interleaved(uint64_t first_row, uint64_t count, float* out) const;

 private:
  // Element (i, k) of the block goes to out[i * row_stride + k * col_stride].
  void decode_strided(uint64_t first_row, uint64_t count, float* out, uint64_t row_stride, uint64_t col_stride) const;

  WeightFormat format_;
  OwnedTensor weight_;
  std::optional<OwnedTensor> scale_;
  uint64_t rows_, cols_, row_bytes_ = 0, scale_cols_ = 0;
  float multiplier_;
  float element_lut_[256] = {}, scale_lut_[256] = {};
};

// A float tensor of any float dtype (F32, BF16, F16) as float values.
std::vector<float> float_values(const OwnedTensor& t);

}  // namespace moepack::experts
