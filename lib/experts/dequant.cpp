#include "lib/experts/dequant.h"

#include <cstring>

#include "lib/core/codecs.h"
#include "lib/core/error.h"

namespace moepack::experts {
namespace {

constexpr FormatInfo kFormats[] = {
    {WeightFormat::mxfp4, "mxfp4", 2, 1, 32},
    {WeightFormat::mxfp6_e3m2, "mxfp6_e3m2", 4, 3, 32},
    {WeightFormat::mxfp6_e2m3, "mxfp6_e2m3", 4, 3, 32},
    {WeightFormat::mxfp8, "mxfp8", 1, 1, 32},
    {WeightFormat::nvfp4, "nvfp4", 2, 1, 16},
    {WeightFormat::float16or32, "float", 1, 0, 0},  // bytes per element come from the dtype
    {WeightFormat::int_wna16, "int", 0, 0, 0},       // several tensors per weight: int_dequant.h
    {WeightFormat::fp8_e4m3, "fp8", 1, 1, 0},        // float scales over blocks: fp8_dequant.h
    {WeightFormat::int8, "int8", 1, 1, 0},           // float scales per channel: fp8_dequant.h
    {WeightFormat::w4a8_fp8, "w4a8_fp8", 0, 0, 0},   // a value table per group: int_dequant.h
};

// The element code at logical column `c` of a row that starts at `row`.
uint8_t element_code(WeightFormat f, const uint8_t* row, uint64_t c) {
  switch (f) {
    case WeightFormat::mxfp4:
    case WeightFormat::nvfp4: {
      const uint8_t b = row[c / 2];
      return (c & 1) ? static_cast<uint8_t>(b >> 4) : static_cast<uint8_t>(b & 0xF);
    }
    case WeightFormat::mxfp6_e3m2:
    case WeightFormat::mxfp6_e2m3: {
      // Four 6-bit codes in a little-endian 24-bit group: code i at bits 6i..6i+5.
      const uint8_t* g = row + (c / 4) * 3;
      const uint32_t word = static_cast<uint32_t>(g[0]) | (static_cast<uint32_t>(g[1]) << 8) | (static_cast<uint32_t>(g[2]) << 16);
      return static_cast<uint8_t>((word >> (6 * (c % 4))) & 0x3F);
    }
    case WeightFormat::mxfp8: return row[c];
    case WeightFormat::float16or32:
    case WeightFormat::int_wna16:
    case WeightFormat::fp8_e4m3:
    case WeightFormat::int8:
    case WeightFormat::w4a8_fp8: break;
  }
  throw_internal("element_code: not a coded format");
}

float element_value(WeightFormat f, uint8_t code) {
  switch (f) {
    case WeightFormat::mxfp4:
    case WeightFormat::nvfp4: return e2m1_to_float(code);
    case WeightFormat::mxfp6_e3m2: return e3m2_to_float(code);
    case WeightFormat::mxfp6_e2m3: return e2m3_to_float(code);
    case WeightFormat::mxfp8: return e4m3_to_float(code);
    case WeightFormat::float16or32:
    case WeightFormat::int_wna16:
    case WeightFormat::fp8_e4m3:
    case WeightFormat::int8:
    case WeightFormat::w4a8_fp8: break;
  }
  throw_internal("element_value: not a coded format");
}

float scale_value(WeightFormat f, uint8_t s) { return f == WeightFormat::nvfp4 ? e4m3_to_float(s) : e8m0_to_float(s); }

}  // namespace

const FormatInfo& format_info(WeightFormat f) {
  for (const auto& row : kFormats)
    if (row.format == f) return row;
  throw_internal("format_info: unknown format");
}

std::optional<WeightFormat> parse_weight_format(std::string_view name) {
  for (const auto& row : kFormats)
    if (row.name == name) return row.format;
  return std::nullopt;
}

std::optional<WeightFormat> weight_format_of(std::string_view family, std::string_view weight_key) {
  if (family == "unquantized") return WeightFormat::float16or32;
  if (family == "wna16") return WeightFormat::int_wna16;
  if (family == "fp8") return WeightFormat::fp8_e4m3;
  if (family == "int8") return WeightFormat::int8;
  if (family == "w4a8" && weight_key == "kInt4Static") return WeightFormat::w4a8_fp8;
  if (weight_key == "kMxfp4Static") return WeightFormat::mxfp4;
  if (weight_key == "kMxfp6E3M2Static") return WeightFormat::mxfp6_e3m2;
  if (weight_key == "kMxfp6E2M3Static") return WeightFormat::mxfp6_e2m3;
  if (weight_key == "kMxfp8Static") return WeightFormat::mxfp8;
  if (weight_key == "kNvfp4Static") return WeightFormat::nvfp4;
  return std::nullopt;
}

std::vector<float> float_values(const OwnedTensor& t) {
  const uint64_t n = t.num_elements();
  std::vector<float> out(static_cast<size_t>(n));
  switch (t.dtype) {
    case DType::F32:
      if (t.bytes.size() != n * 4) throw_internal("float_values: F32 size");
      std::memcpy(out.data(), t.bytes.data(), t.bytes.size());
      break;
    case DType::BF16:
    case DType::F16:
      if (t.bytes.size() != n * 2) throw_internal("float_values: 16-bit size");
      for (uint64_t i = 0; i < n; ++i) {
        const uint16_t bits = static_cast<uint16_t>(t.bytes[2 * i] | (t.bytes[2 * i + 1] << 8));
        out[i] = t.dtype == DType::BF16 ? bf16_to_float(bits) : f16_to_float(bits);
      }
      break;
    default: throw Error(ErrorKind::bad_input, "expected a float tensor (F32, BF16, F16), got " + std::string(dtype_name(t.dtype)));
  }
  return out;
}

std::vector<float> dequantize(WeightFormat format, const OwnedTensor& weight, const OwnedTensor* block_scale, uint64_t rows, uint64_t cols,
                              float global_multiplier) {
  if (format == WeightFormat::float16or32) {
    std::vector<float> v = float_values(weight);
    if (v.size() != rows * cols) throw Error(ErrorKind::bad_input, "weight holds " + std::to_string(v.size()) + " values, expected " + shape_string(std::vector<uint64_t>{rows, cols}));
    if (global_multiplier != 1.0f)
      for (auto& x : v) x *= global_multiplier;
    return v;
  }
  if (format == WeightFormat::int_wna16 || format == WeightFormat::w4a8_fp8)
    throw_internal("dequantize: integer weights take dequantize_int / dequantize_int4_table (int_dequant.h)");
  if (format == WeightFormat::fp8_e4m3 || format == WeightFormat::int8) throw_internal("dequantize: 8-bit scaled weights take dequantize_fp8 (fp8_dequant.h)");
  const RowDequantizer rows_of(format, weight, block_scale ? std::optional<OwnedTensor>(*block_scale) : std::nullopt, rows, cols, global_multiplier);
  std::vector<float> out(static_cast<size_t>(rows * cols));
  rows_of.decode(0, rows, out.data());
  return out;
}

bool RowDequantizer::takes(WeightFormat format) {
  switch (format) {
    case WeightFormat::mxfp4:
    case WeightFormat::mxfp6_e3m2:
    case WeightFormat::mxfp6_e2m3:
    case WeightFormat::mxfp8:
    case WeightFormat::nvfp4:
    case WeightFormat::float16or32: return true;
    case WeightFormat::int_wna16:
    case WeightFormat::fp8_e4m3:
    case WeightFormat::int8:
    case WeightFormat::w4a8_fp8: return false;
  }
  return false;
}

RowDequantizer::RowDequantizer(WeightFormat format, OwnedTensor weight, std::optional<OwnedTensor> block_scale, uint64_t rows, uint64_t cols,
                               float global_multiplier)
    : format_(format), weight_(std::move(weight)), scale_(std::move(block_scale)), rows_(rows), cols_(cols), multiplier_(global_multiplier) {
  if (!takes(format)) throw_internal("RowDequantizer: " + std::string(format_info(format).name) + " dequantizes whole");
  if (format == WeightFormat::float16or32) {
    if (weight_.dtype != DType::F32 && weight_.dtype != DType::BF16 && weight_.dtype != DType::F16)
      throw Error(ErrorKind::bad_input, "expected a float tensor (F32, BF16, F16), got " + std::string(dtype_name(weight_.dtype)));
    if (weight_.num_elements() != rows * cols || weight_.bytes.size() != rows * cols * (dtype_bits(weight_.dtype) / 8))
      throw Error(ErrorKind::bad_input, "weight holds " + std::to_string(weight_.num_elements()) + " values, expected " + shape_string(std::vector<uint64_t>{rows, cols}));
    return;
  }
  const FormatInfo& info = format_info(format);
  if (cols % info.elements_per_group || cols % info.block)
    throw Error(ErrorKind::bad_input, std::string(info.name) + ": " + std::to_string(cols) + " columns do not fill whole storage groups and scale blocks");
  row_bytes_ = cols / info.elements_per_group * info.bytes_per_group;
  scale_cols_ = cols / info.block;
  if (weight_.bytes.size() != rows * row_bytes_)
    throw Error(ErrorKind::bad_input, std::string(info.name) + " weight has " + std::to_string(weight_.bytes.size()) + " bytes, expected " + std::to_string(rows * row_bytes_) +
                                          " for " + shape_string(std::vector<uint64_t>{rows, cols}));
  if (!scale_ || scale_->bytes.size() != rows * scale_cols_)
    throw Error(ErrorKind::bad_input, std::string(info.name) + " block scale must hold " + std::to_string(rows * scale_cols_) + " bytes ([" + std::to_string(rows) + ", " +
                                          std::to_string(scale_cols_) + "])");
  // Decode tables once: 16 or 64 element codes, 256 scale codes.
  for (int c = 0; c < 256; ++c) {
    element_lut_[c] = (format == WeightFormat::mxfp8 || c < 64) ? element_value(format, static_cast<uint8_t>(c)) : 0.0f;
    scale_lut_[c] = scale_value(format, static_cast<uint8_t>(c)) * global_multiplier;
  }
}

void RowDequantizer::decode(uint64_t first_row, uint64_t count, float* out) const {
  if (first_row > rows_ || count > rows_ - first_row) throw_internal("RowDequantizer::decode: rows out of range");
  if (format_ == WeightFormat::float16or32) {
    const unsigned width = dtype_bits(weight_.dtype) / 8;
    const uint8_t* in = weight_.bytes.data() + first_row * cols_ * width;
    const uint64_t n = count * cols_;
    if (weight_.dtype == DType::F32) {
      std::memcpy(out, in, static_cast<size_t>(n * 4));
    } else {
      for (uint64_t i = 0; i < n; ++i) {
        const uint16_t bits = static_cast<uint16_t>(in[2 * i] | (in[2 * i + 1] << 8));
        out[i] = weight_.dtype == DType::BF16 ? bf16_to_float(bits) : f16_to_float(bits);
      }
    }
    if (multiplier_ != 1.0f)
      for (uint64_t i = 0; i < n; ++i) out[i] *= multiplier_;
    return;
  }
  const FormatInfo& info = format_info(format_);
  // FP4 (two codes a byte, blocks of an even size) and MXFP8 (a code a byte) take a loop per
  // scale block with the scale hoisted: the same products, several times the speed of the
  // per-element decode FP6 keeps.
  const bool nibbles = info.bytes_per_group == 1 && info.elements_per_group == 2 && info.block % 2 == 0;
  const bool bytes = info.bytes_per_group == 1 && info.elements_per_group == 1;
  for (uint64_t r = first_row; r < first_row + count; ++r) {
    const uint8_t* row = weight_.bytes.data() + r * row_bytes_;
    const uint8_t* scales = scale_->bytes.data() + r * scale_cols_;
    float* dst = out + (r - first_row) * cols_;
    if (nibbles) {
      for (uint64_t b = 0; b < scale_cols_; ++b) {
        const float s = scale_lut_[scales[b]];
        const uint8_t* codes = row + b * info.block / 2;
        float* d = dst + b * info.block;
        for (uint64_t i = 0; i < info.block / 2; ++i) {
          d[2 * i] = element_lut_[codes[i] & 0xF] * s;
          d[2 * i + 1] = element_lut_[codes[i] >> 4] * s;
        }
      }
    } else if (bytes) {
      for (uint64_t b = 0; b < scale_cols_; ++b) {
        const float s = scale_lut_[scales[b]];
        for (uint64_t i = b * info.block; i < (b + 1) * info.block; ++i) dst[i] = element_lut_[row[i]] * s;
      }
    } else {
      for (uint64_t c = 0; c < cols_; ++c) dst[c] = element_lut_[element_code(format_, row, c)] * scale_lut_[scales[c / info.block]];
    }
  }
}

}  // namespace moepack::experts
