// See cpu_bias_f32.h for the drawn layout and the upstream definition.
#include "packers/cpu_bias_f32.h"

#include <cstring>

#include "lib/core/codecs.h"
#include "packers/triton_common.h"

namespace moepack::packers {
namespace {

uint64_t checked_length(const std::string& layout, DType dtype, std::span<const uint64_t> shape) {
  if (dtype != DType::BF16 && dtype != DType::F16 && dtype != DType::F32)
    detail::refuse(layout, shape, "bias must be BF16, F16 or F32, got " + std::string(dtype_name(dtype)));
  if (shape.size() != 1 || shape[0] == 0) detail::refuse(layout, shape, "expects one expert's 1-D bias [N]");
  return shape[0];
}

void check_scalar(const std::string& layout, DType dtype, std::span<const uint64_t> shape) {
  if (dtype != DType::BF16 && dtype != DType::F16 && dtype != DType::F32)
    detail::refuse(layout, shape, "scalar must be BF16, F16 or F32, got " + std::string(dtype_name(dtype)));
  if (!shape.empty()) detail::refuse(layout, shape, "expects one expert's scalar (shape [])");
}

float load_as_float(DType dtype, const uint8_t* p) {
  if (dtype == DType::F32) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  const uint16_t bits = static_cast<uint16_t>(p[0] | (p[1] << 8));
  return dtype == DType::BF16 ? bf16_to_float(bits) : f16_to_float(bits);
}

void store_from_float(DType dtype, float v, uint8_t* p) {
  if (dtype == DType::F32) {
    std::memcpy(p, &v, 4);
    return;
  }
  const uint16_t bits = dtype == DType::BF16 ? float_to_bf16(v) : float_to_f16(v);
  p[0] = static_cast<uint8_t>(bits & 0xFF);
  p[1] = static_cast<uint8_t>(bits >> 8);
}

}  // namespace

std::vector<uint64_t> BiasToF32Layout::packed_shape(std::span<const uint64_t> canonical_shape) const {
  return {checked_length(name(), DType::F32, canonical_shape)};
}

void BiasToF32Layout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  const uint64_t n = checked_length(name(), canonical.dtype, canonical.shape);
  const uint64_t in_size = static_cast<uint64_t>(dtype_bits(canonical.dtype) / 8);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), n * in_size);
  detail::expect_bytes(name(), "packed", packed.size(), n * 4);
  for (uint64_t i = 0; i < n; ++i)
    store_from_float(DType::F32, load_as_float(canonical.dtype, canonical.bytes.data() + i * in_size), packed.data() + 4 * i);
}

void BiasToF32Layout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  const uint64_t n = checked_length(name(), canonical.dtype, canonical.shape);
  const uint64_t out_size = static_cast<uint64_t>(dtype_bits(canonical.dtype) / 8);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), n * out_size);
  detail::expect_bytes(name(), "packed", packed.size(), n * 4);
  for (uint64_t i = 0; i < n; ++i)
    store_from_float(canonical.dtype, load_as_float(DType::F32, packed.data() + 4 * i), canonical.bytes.data() + i * out_size);
}

std::vector<uint64_t> ScalarToF32Layout::packed_shape(std::span<const uint64_t> canonical_shape) const {
  check_scalar(name(), DType::F32, canonical_shape);
  return {};
}

void ScalarToF32Layout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  check_scalar(name(), canonical.dtype, canonical.shape);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), static_cast<uint64_t>(dtype_bits(canonical.dtype) / 8));
  detail::expect_bytes(name(), "packed", packed.size(), 4);
  store_from_float(DType::F32, load_as_float(canonical.dtype, canonical.bytes.data()), packed.data());
}

void ScalarToF32Layout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  check_scalar(name(), canonical.dtype, canonical.shape);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), static_cast<uint64_t>(dtype_bits(canonical.dtype) / 8));
  detail::expect_bytes(name(), "packed", packed.size(), 4);
  store_from_float(canonical.dtype, load_as_float(DType::F32, packed.data()), canonical.bytes.data());
}

}  // namespace moepack::packers
