#include "lib/experts/dequant.h"

#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

#if defined(__x86_64__) && defined(__GNUC__)
#define MOEPACK_DEQUANT_AVX2 1
// FP4 rows decoded 8 at a time into the column-interleaved block (out[k * 8 + i]) with AVX2:
// 16 code bytes of each row are transposed in registers so that one 8-byte lane holds one byte
// column of the 8 rows; its low and high nibbles index the 16-entry value table (two 8-entry
// permutes chosen by the code's sign bit) and are multiplied by the rows' scales of that block.
// The same table entries and the same float products as the scalar loop: the same bits.
// Returns the byte columns done (a multiple of 16); the caller decodes the rest.
__attribute__((target("avx2"))) inline __m256 fp4_values(__m128i eight_bytes, int shift, __m256 lut_low, __m256 lut_high, __m256 scale) {
  const __m256i code = _mm256_and_si256(_mm256_srli_epi32(_mm256_cvtepu8_epi32(eight_bytes), shift), _mm256_set1_epi32(0xF));
  const __m256 v = _mm256_blendv_ps(_mm256_permutevar8x32_ps(lut_low, code), _mm256_permutevar8x32_ps(lut_high, code),
                                    _mm256_castsi256_ps(_mm256_slli_epi32(code, 28)));
  return _mm256_mul_ps(v, scale);
}
__attribute__((target("avx2"))) uint64_t decode_fp4_interleaved8_avx2(const uint8_t* const* rows, const uint8_t* const* scale_rows, uint64_t row_bytes,
                                                                      uint64_t block, const float* element_lut, const float* scale_lut, float* out) {
  const __m256 lut_low = _mm256_loadu_ps(element_lut), lut_high = _mm256_loadu_ps(element_lut + 8);
  uint64_t done = 0;
  uint64_t scale_block = ~uint64_t{0};
  __m256 scale = _mm256_setzero_ps();
  for (; done + 16 <= row_bytes; done += 16) {
    __m128i r[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[i] + done));
    const __m128i t0 = _mm_unpacklo_epi8(r[0], r[1]), t1 = _mm_unpackhi_epi8(r[0], r[1]);
    const __m128i t2 = _mm_unpacklo_epi8(r[2], r[3]), t3 = _mm_unpackhi_epi8(r[2], r[3]);
    const __m128i t4 = _mm_unpacklo_epi8(r[4], r[5]), t5 = _mm_unpackhi_epi8(r[4], r[5]);
    const __m128i t6 = _mm_unpacklo_epi8(r[6], r[7]), t7 = _mm_unpackhi_epi8(r[6], r[7]);
    const __m128i u[4] = {_mm_unpacklo_epi16(t0, t2), _mm_unpackhi_epi16(t0, t2), _mm_unpacklo_epi16(t1, t3), _mm_unpackhi_epi16(t1, t3)};
    const __m128i v[4] = {_mm_unpacklo_epi16(t4, t6), _mm_unpackhi_epi16(t4, t6), _mm_unpacklo_epi16(t5, t7), _mm_unpackhi_epi16(t5, t7)};
    for (int q = 0; q < 4; ++q) {
      // Byte columns done + 4q .. +3, each as 8 bytes (rows 0..7).
      const __m128i pair[2] = {_mm_unpacklo_epi32(u[q], v[q]), _mm_unpackhi_epi32(u[q], v[q])};
      for (int h = 0; h < 2; ++h)
        for (int c = 0; c < 2; ++c) {
          const uint64_t j = done + 4 * q + 2 * h + c;  // byte column: elements 2j, 2j + 1
          if (2 * j / block != scale_block) {
            scale_block = 2 * j / block;
            scale = _mm256_setr_ps(scale_lut[scale_rows[0][scale_block]], scale_lut[scale_rows[1][scale_block]], scale_lut[scale_rows[2][scale_block]],
                                   scale_lut[scale_rows[3][scale_block]], scale_lut[scale_rows[4][scale_block]], scale_lut[scale_rows[5][scale_block]],
                                   scale_lut[scale_rows[6][scale_block]], scale_lut[scale_rows[7][scale_block]]);
          }
          const __m128i bytes = c == 0 ? pair[h] : _mm_srli_si128(pair[h], 8);
          _mm256_storeu_ps(out + 2 * j * 8, fp4_values(bytes, 0, lut_low, lut_high, scale));
          _mm256_storeu_ps(out + (2 * j + 1) * 8, fp4_values(bytes, 4, lut_low, lut_high, scale));
        }
    }
  }
  return done;
}
bool have_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
#endif

}  // namespace

const FormatInfo& format_info(WeightFormat f) {
  for (const auto& row : kFormats)
    if (row.format == f) return row;
  throw_internal("format_info: unknown format");
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

void RowDequantizer::decode(uint64_t first_row, uint64_t count, float* out) const { decode_strided(first_row, count, out, cols_, 1); }

void RowDequantizer::decode_interleaved(uint64_t first_row, uint64_t count, float* out) const { decode_strided(first_row, count, out, 1, count); }

void RowDequantizer::decode_strided(uint64_t first_row, uint64_t count, float* out, uint64_t row_stride, uint64_t col_stride) const {
  if (first_row > rows_ || count > rows_ - first_row) throw_internal("RowDequantizer::decode: rows out of range");
  if (format_ == WeightFormat::float16or32) {
    const unsigned width = dtype_bits(weight_.dtype) / 8;
    for (uint64_t i = 0; i < count; ++i) {
      const uint8_t* in = weight_.bytes.data() + (first_row + i) * cols_ * width;
      float* dst = out + i * row_stride;
      for (uint64_t k = 0; k < cols_; ++k) {
        float v = 0;
        if (weight_.dtype == DType::F32) {
          std::memcpy(&v, in + 4 * k, 4);
        } else {
          const uint16_t bits = static_cast<uint16_t>(in[2 * k] | (in[2 * k + 1] << 8));
          v = weight_.dtype == DType::BF16 ? bf16_to_float(bits) : f16_to_float(bits);
        }
        dst[k * col_stride] = multiplier_ != 1.0f ? v * multiplier_ : v;
      }
    }
    return;
  }
  const FormatInfo& info = format_info(format_);
  // FP4 (two codes a byte, blocks of an even size) and MXFP8 (a code a byte) take a loop per
  // scale block with the scale hoisted: the same products, several times the speed of the
  // per-element decode FP6 keeps.
  const bool nibbles = info.bytes_per_group == 1 && info.elements_per_group == 2 && info.block % 2 == 0;
  const bool bytes = info.bytes_per_group == 1 && info.elements_per_group == 1;
  uint64_t first_byte = 0;  // FP4 byte columns the SIMD path decoded already
#ifdef MOEPACK_DEQUANT_AVX2
  if (nibbles && count == 8 && col_stride == 8 && row_stride == 1 && have_avx2()) {
    const uint8_t* rows[8];
    const uint8_t* scale_rows[8];
    for (int i = 0; i < 8; ++i) {
      rows[i] = weight_.bytes.data() + (first_row + i) * row_bytes_;
      scale_rows[i] = scale_->bytes.data() + (first_row + i) * scale_cols_;
    }
    first_byte = decode_fp4_interleaved8_avx2(rows, scale_rows, row_bytes_, info.block, element_lut_, scale_lut_, out);
  }
#endif
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t r = first_row + i;
    const uint8_t* row = weight_.bytes.data() + r * row_bytes_;
    const uint8_t* scales = scale_->bytes.data() + r * scale_cols_;
    float* dst = out + i * row_stride;
    if (nibbles) {
      for (uint64_t j = first_byte; j < row_bytes_; ++j) {
        const float s = scale_lut_[scales[2 * j / info.block]];
        dst[2 * j * col_stride] = element_lut_[row[j] & 0xF] * s;
        dst[(2 * j + 1) * col_stride] = element_lut_[row[j] >> 4] * s;
      }
    } else if (bytes) {
      for (uint64_t b = 0; b < scale_cols_; ++b) {
        const float s = scale_lut_[scales[b]];
        for (uint64_t k = b * info.block; k < (b + 1) * info.block; ++k) dst[k * col_stride] = element_lut_[row[k]] * s;
      }
    } else {
      for (uint64_t k = 0; k < cols_; ++k) dst[k * col_stride] = element_lut_[element_code(format_, row, k)] * scale_lut_[scales[k / info.block]];
    }
  }
}

}  // namespace moepack::experts
