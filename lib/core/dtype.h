// The 22 safetensors element types, in the reference's enum order ("increasing alignment"),
// which the writer's tensor sort depends on (huggingface/safetensors : safetensors/src/tensor.rs
// `enum Dtype`).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace moepack {

enum class DType : uint8_t {
  BOOL, F4, F6_E2M3, F6_E3M2, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ,
  I16, U16, F16, BF16, I32, U32, F32, C64, F64, I64, U64,
};

inline constexpr int kDTypeCount = 22;

// Bits per element: 4 for F4, 6 for the F6 types, else a multiple of 8.
int dtype_bits(DType t);
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);
bool dtype_is_float(DType t);  // a floating type whose values can be NaN/Inf (F16, BF16, F32, F64, F8 E4M3/E5M2)

}  // namespace moepack
