#include "lib/core/tensor.h"

#include <cstdio>
#include <cstring>

#include "lib/core/codecs.h"
#include "lib/core/error.h"

namespace moepack {

uint64_t byte_size(DType dtype, std::span<const uint64_t> shape) {
  uint64_t n = 1;
  for (uint64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n)) throw_internal("tensor size overflows: " + shape_string(shape));
  uint64_t bits;
  if (__builtin_mul_overflow(n, static_cast<uint64_t>(dtype_bits(dtype)), &bits)) throw_internal("tensor size overflows");
  if (bits % 8) throw_internal("sub-byte tensor does not end on a byte boundary: " + shape_string(shape));
  return bits / 8;
}

OwnedTensor::OwnedTensor(DType t, std::vector<uint64_t> s) : dtype(t), shape(std::move(s)) {
  bytes.assign(static_cast<size_t>(byte_size(dtype, shape)), 0);
}

uint64_t OwnedTensor::num_elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

std::string shape_string(std::span<const uint64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string human_bytes(uint64_t n) {
  static const char* units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1000.0 && u < 5) {
    v /= 1000.0;
    ++u;
  }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
  else std::snprintf(buf, sizeof buf, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

std::vector<int64_t> integer_values(const OwnedTensor& t) {
  if (t.dtype != DType::I32 && t.dtype != DType::I64) throw_internal("integer_values of a " + std::string(dtype_name(t.dtype)) + " tensor");
  const size_t width = t.dtype == DType::I32 ? 4 : 8;
  std::vector<int64_t> out(t.bytes.size() / width);
  for (size_t i = 0; i < out.size(); ++i) {
    if (width == 4) {
      int32_t v;
      std::memcpy(&v, t.bytes.data() + 4 * i, 4);
      out[i] = v;
    } else {
      std::memcpy(&out[i], t.bytes.data() + 8 * i, 8);
    }
  }
  return out;
}

float float_element(const OwnedTensor& t, uint64_t i) {
  switch (t.dtype) {
    case DType::F32: {
      float v;
      std::memcpy(&v, t.bytes.data() + 4 * i, 4);
      return v;
    }
    case DType::BF16: return bf16_to_float(static_cast<uint16_t>(t.bytes[2 * i] | (t.bytes[2 * i + 1] << 8)));
    case DType::F16: return f16_to_float(static_cast<uint16_t>(t.bytes[2 * i] | (t.bytes[2 * i + 1] << 8)));
    // E8M0 scales a loader widens (torch's float8_e8m0fnu -> float32 copy: 2^(e-127), 0xFF NaN).
    case DType::F8_E8M0: return e8m0_to_float(t.bytes[i]);
    default: throw_internal("float_element of a " + std::string(dtype_name(t.dtype)) + " tensor");
  }
}

OwnedTensor cast_float_tensor(const OwnedTensor& t, DType to) {
  if (t.dtype == to) return t;
  OwnedTensor out(to, t.shape);
  const uint64_t n = t.num_elements();
  for (uint64_t i = 0; i < n; ++i) {
    const float v = float_element(t, i);
    switch (to) {
      case DType::F32: std::memcpy(out.bytes.data() + 4 * i, &v, 4); break;
      case DType::BF16:
      case DType::F16: {
        const uint16_t bits = to == DType::BF16 ? float_to_bf16(v) : float_to_f16(v);
        std::memcpy(out.bytes.data() + 2 * i, &bits, 2);
        break;
      }
      default: throw_internal("cast_float_tensor to " + std::string(dtype_name(to)));
    }
  }
  return out;
}

}  // namespace moepack
