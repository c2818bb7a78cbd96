// Small helpers shared by the triton_kernels (triton_*) and sgl-kernel CPU (cpu_*) packers:
// shape validation with messages that name the layout and the rule, and size arithmetic.
//
// All of these packers take ONE expert's canonical 2-D tensor [N, C] (N = output rows of the
// GEMM, C = bytes along K: packed FP4 pairs or one E8M0 byte per 32-element group) and permute
// bytes; none of them changes a value except HopperMXValue's bit twiddle.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "lib/core/error.h"
#include "lib/core/tensor.h"

namespace moepack::packers::detail {

// The triton_kernels release vLLM e9d1398d9 pins for CUDA (cmake/external_projects/triton_kernels.cmake).
inline constexpr std::string_view kTritonKernelsVersion = "v3.5.1";

inline uint64_t round_up(uint64_t x, uint64_t multiple) { return (x + multiple - 1) / multiple * multiple; }

struct Matrix {
  uint64_t rows = 0;  // N
  uint64_t cols = 0;  // bytes per row
};

// A forbidden size is a checkpoint/deployment vLLM would refuse too (or an oracle bug that
// skipped the padding); either way it is reported as bad input naming layout and rule.
[[noreturn]] inline void refuse(std::string_view layout, std::span<const uint64_t> shape, const std::string& rule) {
  throw Error(ErrorKind::bad_input,
              std::string(layout) + ": canonical shape " + shape_string(shape) + " refused: " + rule);
}

// Checks a canonical shape is a non-empty 2-D matrix of a one-byte dtype.
inline Matrix expect_byte_matrix(std::string_view layout, DType dtype, std::span<const uint64_t> shape) {
  if (dtype_bits(dtype) != 8)
    refuse(layout, shape, "expects a one-byte dtype (U8 FP4 pairs or E8M0 bytes), got " + std::string(dtype_name(dtype)));
  if (shape.size() != 2) refuse(layout, shape, "expects one expert's 2-D tensor [N, C]");
  if (shape[0] == 0 || shape[1] == 0) refuse(layout, shape, "empty tensor");
  return {shape[0], shape[1]};
}

inline void expect_bytes(std::string_view layout, std::string_view what, uint64_t have, uint64_t want) {
  if (have != want)
    throw_internal(std::string(layout) + ": " + std::string(what) + " buffer has " + std::to_string(have) +
                   " bytes, expected " + std::to_string(want));
}

}  // namespace moepack::packers::detail
