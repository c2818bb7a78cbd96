// Scalar codecs of the element types the packers and experts touch. Each decode is exact
// (every code maps to one float); encodes round to nearest even like PyTorch's casts.
#pragma once

#include <cstdint>

namespace moepack {

// E2M1 (FP4): bit 3 sign, bits 2..0 index {0, .5, 1, 1.5, 2, 3, 4, 6}. 0x8 is -0.0.
float e2m1_to_float(uint8_t code);
// Nearest E2M1 code, ties to even code (the rounding of triton_kernels' and compressed-tensors'
// quantizers). NaN maps to +0.
uint8_t float_to_e2m1(float v);

// E8M0: 2^(s-127); 255 is NaN. (triton_kernels decodes 0 as 0.0 via a bit trick; we follow the
// ldexp definition of the OCP MX spec and gpt-oss: 2^-127.)
float e8m0_to_float(uint8_t s);
inline bool e8m0_is_nan(uint8_t s) { return s == 0xFF; }

// FP6 (OCP MX): bit 5 sign, no inf/NaN. E3M2: bias 3, max 28; E2M3: bias 1, max 7.5.
float e3m2_to_float(uint8_t code);
float e2m3_to_float(uint8_t code);

// E4M3FN: bias 7, max 448, no inf, 0x7F/0xFF NaN.
float e4m3_to_float(uint8_t code);
// PyTorch c10 semantics (ERRATA 7): RNE, subnormals RNE, |v| > 464 → NaN with sign, 464 → 448.
uint8_t float_to_e4m3(float v);
inline bool e4m3_is_nan(uint8_t code) { return (code & 0x7F) == 0x7F; }

// E4M3FNUZ (AMD): bias 8, 0x80 is the only NaN, no negative zero.
float e4m3fnuz_to_float(uint8_t code);
// HIP's __hip_cvt_float_to_fp8(v, __HIP_SATFINITE, __HIP_E4M3_FNUZ), what vLLM's ROCm kernels
// write on MI300: RNE, subnormals RNE (quantum 2^-10), |v| beyond 240 saturates to ±240 (0x7F),
// NaN → 0x80, and a result of zero is 0x00 whatever its sign (0x80 would be NaN). Within vLLM's
// ±224 clamp this equals torch's own float→float8_e4m3fnuz cast (c10, CPU and CUDA): no code
// differed over 25 million values (every code, every midpoint and its neighbours, subnormals).
uint8_t float_to_e4m3fnuz(float v);
// E5M2 (IEEE-like): bias 15, inf and NaN.
float e5m2_to_float(uint8_t code);
float e5m2fnuz_to_float(uint8_t code);

float bf16_to_float(uint16_t bits);
uint16_t float_to_bf16(float v);  // RNE, NaN stays NaN
float f16_to_float(uint16_t bits);
uint16_t float_to_f16(float v);   // RNE

}  // namespace moepack
