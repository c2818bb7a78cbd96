// Quantizers and bit packers that turn a float matrix into the bytes each checkpoint family
// stores. They follow the families' scale conventions (checkpoint-formats.md 3.x,
// layouts-fp4.md 1-2) closely enough that dequantizing with the family's rule approximates the
// source; they do not try to reproduce any one tool's exact calibration (observers, GPTQ's
// Hessian updates, AWQ's search), which a converter never sees.
//
// All matrices are row-major [rows, cols] = nn.Linear [out, in]; "groups" run along cols.
#pragma once

#include <cstdint>
#include <vector>

namespace moepack::synth {

struct Matrix {
  uint64_t rows = 0, cols = 0;
  std::vector<float> values;  // rows * cols
  float at(uint64_t r, uint64_t c) const { return values[r * cols + c]; }
};

float abs_max(const Matrix& m);

// ---- element codecs the core library lacks (its decoders are in lib/core/codecs.h) ---------

// FP6 E3M2 (OCP MX): sign bit 5, exponent bias 3, 2 mantissa bits, no inf/NaN, max 28.
uint8_t float_to_e3m2(float v);  // round to nearest even, saturating at ±28

// ---- OCP MX: one E8M0 power-of-two scale per 32 elements along a row -----------------------

enum class MxElement { e2m1, e3m2, e4m3 };
float mx_element_max(MxElement e);  // 6, 28, 448

struct MxQuantized {
  std::vector<uint8_t> codes;   // one element code per value, row-major [rows, cols]
  std::vector<uint8_t> scales;  // E8M0 bytes [rows, cols / 32]
};
// The scale is the smallest power of two that maps the block's amax into the element range
// (triton_kernels' "round up" scale mode), so no element saturates.
MxQuantized quantize_mx(const Matrix& w, MxElement element);

// ---- NVFP4: E4M3 scale per 16 elements, times one FP32 per-tensor factor -------------------

struct NvFp4Quantized {
  std::vector<uint8_t> codes;   // E2M1 codes [rows, cols]
  std::vector<uint8_t> scales;  // E4M3 bytes [rows, cols / 16]
};
// Dequantized value = e2m1(code) · e4m3(scale) · global_multiplier. compressed-tensors stores
// the reciprocal of the multiplier (weight_global_scale = 448·6/amax); ModelOpt stores the
// multiplier itself (weight_scale_2 = amax/(6·448)). ModelOpt writes 1.0 as the block scale of an
// all-zero block; compressed-tensors writes what the division gives (0).
NvFp4Quantized quantize_nvfp4(const Matrix& w, float global_multiplier, bool zero_block_scale_is_one);

// ---- integers with a scale (and zero point) per group of columns ---------------------------

enum class ScaleStorage { bf16, f16, f32 };
float round_to_storage(float v, ScaleStorage s);

struct IntQuantized {
  int bits = 4;
  uint64_t rows = 0, cols = 0, groups = 0;
  std::vector<int32_t> codes;    // unsigned codes in [0, 2^bits) [rows, cols]
  std::vector<float> scales;     // [rows, groups], already rounded to their storage type
  std::vector<int32_t> zeros;    // unsigned zero points [rows, groups]; 2^(bits-1) when symmetric
  std::vector<int32_t> g_idx;    // group of each column [cols]
};
// group_size 0 means one group per row (channel-wise). Symmetric: scale = amax / ((2^bits-1)/2),
// zero 2^(bits-1) (compressed-tensors' and GPTQ's rule, identical once codes are unsigned).
// Asymmetric: scale = (max - min) / (2^bits - 1) over a range that includes 0,
// zero = clamp(-round(min/scale)) (AWQ's and compressed-tensors' rule).
// `g_idx` empty: column c is in group c / group_size. Otherwise it assigns every column a group
// (act-order checkpoints): scales are computed over the columns each group actually holds.
IntQuantized quantize_int(const Matrix& w, int bits, uint64_t group_size, bool symmetric, ScaleStorage storage,
                          const std::vector<int32_t>& g_idx = {});

// An act-order g_idx: a seeded random column order standing in for GPTQ's Hessian ordering;
// the column at position p of that order is in group p / group_size.
std::vector<int32_t> act_order_g_idx(uint64_t cols, uint64_t group_size, uint64_t seed);

// ---- FP8 E4M3 with a float scale per block ------------------------------------------------

struct Fp8Quantized {
  std::vector<uint8_t> codes;  // E4M3 [rows, cols]
  uint64_t scale_rows = 0, scale_cols = 0;
  std::vector<float> scales;   // [ceil(rows/block_rows), ceil(cols/block_cols)], rounded to storage
};
// scale = amax / 448 per block (rows × cols block; pass the full sizes for per-tensor, 1 × cols
// for per-channel). power_of_two rounds the scale up to 2^k (UE8M0 scale formats).
Fp8Quantized quantize_fp8(const Matrix& w, uint64_t block_rows, uint64_t block_cols, ScaleStorage storage,
                          bool power_of_two);

// ---- packers ------------------------------------------------------------------------------

// Two 4-bit codes per byte along each row: element 2j in the low nibble (every FP4 family).
std::vector<uint8_t> pack_nibbles(const std::vector<uint8_t>& codes);
// Four 6-bit codes per 3 bytes along each row as a little-endian bit stream: value i at bits
// 6i..6i+5 of the 24-bit group (AMD Quark's fp6 packing).
std::vector<uint8_t> pack_fp6(const std::vector<uint8_t>& codes);

// compressed-tensors pack_to_int32 along each row: element c at bit (c·bits) mod 32 of word
// c·bits/32; result [rows, cols·bits/32].
std::vector<int32_t> pack_int32_rows(const std::vector<int32_t>& codes, uint64_t rows, uint64_t cols, int bits);
// The same packing along dim 0 (compressed-tensors zero points): [rows·bits/32, cols].
std::vector<int32_t> pack_int32_cols(const std::vector<int32_t>& codes, uint64_t rows, uint64_t cols, int bits);
// Transposes a row-major [rows, cols] matrix.
template <typename T>
std::vector<T> transpose(const std::vector<T>& m, uint64_t rows, uint64_t cols) {
  std::vector<T> t(m.size());
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < cols; ++c) t[c * rows + r] = m[r * cols + c];
  return t;
}
// AutoAWQ's packing along each row, 8 nibbles per word: slot j holds column 8w + AWQ_ORDER[j],
// AWQ_ORDER = {0, 2, 4, 6, 1, 3, 5, 7}.
std::vector<int32_t> pack_awq_rows(const std::vector<int32_t>& codes, uint64_t rows, uint64_t cols);
inline constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// Little-endian byte images of typed vectors.
std::vector<uint8_t> bytes_of(const std::vector<int32_t>& v);
std::vector<uint8_t> bytes_of_f32(const std::vector<float>& v);
std::vector<uint8_t> bytes_as(const std::vector<float>& v, ScaleStorage storage);

}  // namespace moepack::synth
