#include "lib/synth/quantize.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>

#include "lib/core/codecs.h"
#include "lib/core/error.h"
#include "lib/synth/rng.h"

namespace moepack::synth {
namespace {

// ceil(log2(x)) for a positive finite float, exact: frexp only splits the bits.
int ceil_log2(float x) {
  int e;
  float m = std::frexp(x, &e);  // x = m · 2^e, m in [0.5, 1)
  return m == 0.5f ? e - 1 : e;
}

float pow2(int e) { return std::ldexp(1.0f, e); }

void put_le32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace

float abs_max(const Matrix& m) {
  float a = 0.0f;
  for (float v : m.values) a = std::max(a, std::fabs(v));
  return a;
}

uint8_t float_to_e3m2(float v) {
  uint8_t sign = std::signbit(v) ? 0x20 : 0x00;
  if (std::isnan(v)) return 0;
  float a = std::fabs(v);
  if (a >= 28.0f) return sign | 0x1F;
  // Grid spacing is 2^(binade-2) for normals (binade >= -2) and 2^-4 below.
  int e;
  std::frexp(a, &e);
  int binade = std::max(e - 1, -2);
  float quantum = std::ldexp(1.0f, binade - 2);
  float q = std::nearbyint(a / quantum) * quantum;  // ties to even in the default rounding mode
  if (q >= 28.0f) return sign | 0x1F;
  if (q == 0.0f) return sign;
  int qe;
  float qf = std::frexp(q, &qe);
  int exp = qe - 1 + 3;
  if (exp <= 0) return sign | static_cast<uint8_t>(std::lround(q * 16.0f));
  uint32_t man = static_cast<uint32_t>(std::lround((qf * 2.0f - 1.0f) * 4.0f));
  return sign | static_cast<uint8_t>((exp << 2) | man);
}

float mx_element_max(MxElement e) {
  switch (e) {
    case MxElement::e2m1: return 6.0f;
    case MxElement::e3m2: return 28.0f;
    case MxElement::e4m3: return 448.0f;
  }
  return 0.0f;
}

MxQuantized quantize_mx(const Matrix& w, MxElement element) {
  if (w.cols % 32) throw_internal("quantize_mx: columns must be a multiple of 32");
  MxQuantized out;
  out.codes.resize(w.values.size());
  out.scales.resize(w.rows * (w.cols / 32));
  const float emax = mx_element_max(element);
  for (uint64_t r = 0; r < w.rows; ++r) {
    for (uint64_t b = 0; b < w.cols / 32; ++b) {
      const float* x = &w.values[r * w.cols + b * 32];
      float amax = 0.0f;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
      int e = amax > 0.0f ? ceil_log2(amax / emax) : -127;
      e = std::clamp(e, -127, 127);
      out.scales[r * (w.cols / 32) + b] = static_cast<uint8_t>(e + 127);
      for (int i = 0; i < 32; ++i) {
        float v = std::ldexp(x[i], -e);
        uint8_t c = element == MxElement::e2m1 ? float_to_e2m1(v)
                    : element == MxElement::e3m2 ? float_to_e3m2(v)
                                                 : float_to_e4m3(v);
        out.codes[r * w.cols + b * 32 + i] = c;
      }
    }
  }
  return out;
}

NvFp4Quantized quantize_nvfp4(const Matrix& w, float global_multiplier, bool zero_block_scale_is_one) {
  if (w.cols % 16) throw_internal("quantize_nvfp4: columns must be a multiple of 16");
  NvFp4Quantized out;
  out.codes.resize(w.values.size());
  out.scales.resize(w.rows * (w.cols / 16));
  for (uint64_t r = 0; r < w.rows; ++r) {
    for (uint64_t b = 0; b < w.cols / 16; ++b) {
      const float* x = &w.values[r * w.cols + b * 16];
      float amax = 0.0f;
      for (int i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(x[i]));
      uint8_t scale = float_to_e4m3(amax / 6.0f / global_multiplier);
      if (amax == 0.0f && zero_block_scale_is_one) scale = float_to_e4m3(1.0f);
      out.scales[r * (w.cols / 16) + b] = scale;
      float step = e4m3_to_float(scale) * global_multiplier;
      for (int i = 0; i < 16; ++i) out.codes[r * w.cols + b * 16 + i] = step > 0.0f ? float_to_e2m1(x[i] / step) : 0;
    }
  }
  return out;
}

float round_to_storage(float v, ScaleStorage s) {
  switch (s) {
    case ScaleStorage::bf16: return bf16_to_float(float_to_bf16(v));
    case ScaleStorage::f16: return f16_to_float(float_to_f16(v));
    case ScaleStorage::f32: return v;
  }
  return v;
}

IntQuantized quantize_int(const Matrix& w, int bits, uint64_t group_size, bool symmetric, ScaleStorage storage,
                          const std::vector<int32_t>& g_idx) {
  IntQuantized out;
  out.bits = bits;
  out.rows = w.rows;
  out.cols = w.cols;
  if (group_size == 0) group_size = w.cols;
  out.groups = (w.cols + group_size - 1) / group_size;
  if (g_idx.empty()) {
    out.g_idx.resize(w.cols);
    for (uint64_t c = 0; c < w.cols; ++c) out.g_idx[c] = static_cast<int32_t>(c / group_size);
  } else {
    if (g_idx.size() != w.cols) throw_internal("quantize_int: g_idx size differs from the column count");
    out.g_idx = g_idx;
  }
  const int32_t qmax = (1 << bits) - 1;
  out.codes.resize(w.values.size());
  out.scales.assign(w.rows * out.groups, 0.0f);
  out.zeros.assign(w.rows * out.groups, 0);
  std::vector<float> lo(out.groups), hi(out.groups);
  for (uint64_t r = 0; r < w.rows; ++r) {
    std::fill(lo.begin(), lo.end(), 0.0f);  // ranges always include 0, as every quantizer here does
    std::fill(hi.begin(), hi.end(), 0.0f);
    for (uint64_t c = 0; c < w.cols; ++c) {
      int32_t g = out.g_idx[c];
      lo[g] = std::min(lo[g], w.at(r, c));
      hi[g] = std::max(hi[g], w.at(r, c));
    }
    for (uint64_t g = 0; g < out.groups; ++g) {
      float scale;
      int32_t zero;
      if (symmetric) {
        scale = std::max(-lo[g], hi[g]) / (static_cast<float>(qmax) / 2.0f);
        zero = 1 << (bits - 1);
      } else {
        scale = (hi[g] - lo[g]) / static_cast<float>(qmax);
        zero = 0;  // set below from the stored scale
      }
      scale = round_to_storage(scale, storage);
      if (scale == 0.0f) scale = round_to_storage(1.0f, storage);  // an all-zero group
      if (!symmetric) zero = std::clamp(static_cast<int32_t>(-std::nearbyint(lo[g] / scale)), 0, qmax);
      out.scales[r * out.groups + g] = scale;
      out.zeros[r * out.groups + g] = zero;
    }
    for (uint64_t c = 0; c < w.cols; ++c) {
      uint64_t g = static_cast<uint64_t>(out.g_idx[c]);
      float s = out.scales[r * out.groups + g];
      int32_t q = static_cast<int32_t>(std::nearbyint(w.at(r, c) / s)) + out.zeros[r * out.groups + g];
      out.codes[r * w.cols + c] = std::clamp(q, 0, qmax);
    }
  }
  return out;
}

std::vector<int32_t> act_order_g_idx(uint64_t cols, uint64_t group_size, uint64_t seed) {
  std::vector<uint64_t> order(cols);
  std::iota(order.begin(), order.end(), 0);
  Rng rng(seed);
  for (uint64_t i = cols; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);  // Fisher-Yates
  std::vector<int32_t> g_idx(cols);
  for (uint64_t p = 0; p < cols; ++p) g_idx[order[p]] = static_cast<int32_t>(p / group_size);
  return g_idx;
}

Fp8Quantized quantize_fp8(const Matrix& w, uint64_t block_rows, uint64_t block_cols, ScaleStorage storage,
                          bool power_of_two) {
  Fp8Quantized out;
  out.scale_rows = (w.rows + block_rows - 1) / block_rows;
  out.scale_cols = (w.cols + block_cols - 1) / block_cols;
  out.scales.resize(out.scale_rows * out.scale_cols);
  out.codes.resize(w.values.size());
  for (uint64_t br = 0; br < out.scale_rows; ++br) {
    for (uint64_t bc = 0; bc < out.scale_cols; ++bc) {
      uint64_t r_end = std::min(w.rows, (br + 1) * block_rows), c_end = std::min(w.cols, (bc + 1) * block_cols);
      float amax = 0.0f;
      for (uint64_t r = br * block_rows; r < r_end; ++r)
        for (uint64_t c = bc * block_cols; c < c_end; ++c) amax = std::max(amax, std::fabs(w.at(r, c)));
      float scale = amax > 0.0f ? amax / 448.0f : 1.0f;
      if (power_of_two) scale = pow2(ceil_log2(scale));
      scale = round_to_storage(scale, storage);
      out.scales[br * out.scale_cols + bc] = scale;
      for (uint64_t r = br * block_rows; r < r_end; ++r)
        for (uint64_t c = bc * block_cols; c < c_end; ++c) out.codes[r * w.cols + c] = float_to_e4m3(w.at(r, c) / scale);
    }
  }
  return out;
}

std::vector<uint8_t> pack_nibbles(const std::vector<uint8_t>& codes) {
  std::vector<uint8_t> out(codes.size() / 2);
  for (size_t j = 0; j < out.size(); ++j) out[j] = static_cast<uint8_t>((codes[2 * j] & 0xF) | ((codes[2 * j + 1] & 0xF) << 4));
  return out;
}

std::vector<uint8_t> pack_fp6(const std::vector<uint8_t>& codes) {
  std::vector<uint8_t> out(codes.size() / 4 * 3);
  for (size_t g = 0; g < codes.size() / 4; ++g) {
    uint32_t word = 0;
    for (int i = 0; i < 4; ++i) word |= static_cast<uint32_t>(codes[4 * g + i] & 0x3F) << (6 * i);
    for (int b = 0; b < 3; ++b) out[3 * g + b] = static_cast<uint8_t>(word >> (8 * b));
  }
  return out;
}

std::vector<int32_t> pack_int32_rows(const std::vector<int32_t>& codes, uint64_t rows, uint64_t cols, int bits) {
  if ((cols * bits) % 32) throw_internal("pack_int32_rows: a row does not fill whole words");
  uint64_t words = cols * bits / 32;
  std::vector<uint32_t> out(rows * words, 0);
  const uint32_t mask = (1u << bits) - 1;
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < cols; ++c)
      out[r * words + c * bits / 32] |= (static_cast<uint32_t>(codes[r * cols + c]) & mask) << ((c * bits) % 32);
  return std::vector<int32_t>(out.begin(), out.end());
}

std::vector<int32_t> pack_int32_cols(const std::vector<int32_t>& codes, uint64_t rows, uint64_t cols, int bits) {
  // Pack the transpose along its rows, then transpose back.
  std::vector<int32_t> t = transpose(codes, rows, cols);
  uint64_t padded_rows = (rows * bits + 31) / 32 * 32 / bits;  // zero-pad to whole words
  std::vector<int32_t> padded(cols * padded_rows, 0);
  for (uint64_t c = 0; c < cols; ++c)
    for (uint64_t r = 0; r < rows; ++r) padded[c * padded_rows + r] = t[c * rows + r];
  std::vector<int32_t> packed = pack_int32_rows(padded, cols, padded_rows, bits);
  return transpose(packed, cols, padded_rows * bits / 32);
}

std::vector<int32_t> pack_awq_rows(const std::vector<int32_t>& codes, uint64_t rows, uint64_t cols) {
  if (cols % 8) throw_internal("pack_awq_rows: columns must be a multiple of 8");
  uint64_t words = cols / 8;
  std::vector<uint32_t> out(rows * words, 0);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t w = 0; w < words; ++w)
      for (int slot = 0; slot < 8; ++slot)
        out[r * words + w] |= (static_cast<uint32_t>(codes[r * cols + 8 * w + kAwqOrder[slot]]) & 0xF) << (4 * slot);
  return std::vector<int32_t>(out.begin(), out.end());
}

std::vector<uint8_t> bytes_of(const std::vector<int32_t>& v) {
  std::vector<uint8_t> out(v.size() * 4);
  for (size_t i = 0; i < v.size(); ++i) put_le32(&out[4 * i], static_cast<uint32_t>(v[i]));
  return out;
}

std::vector<uint8_t> bytes_of_f32(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 4);
  for (size_t i = 0; i < v.size(); ++i) put_le32(&out[4 * i], std::bit_cast<uint32_t>(v[i]));
  return out;
}

std::vector<uint8_t> bytes_as(const std::vector<float>& v, ScaleStorage storage) {
  if (storage == ScaleStorage::f32) return bytes_of_f32(v);
  std::vector<uint8_t> out(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t h = storage == ScaleStorage::bf16 ? float_to_bf16(v[i]) : float_to_f16(v[i]);
    out[2 * i] = static_cast<uint8_t>(h);
    out[2 * i + 1] = static_cast<uint8_t>(h >> 8);
  }
  return out;
}

}  // namespace moepack::synth
