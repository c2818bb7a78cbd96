#include "formats/safetensors/compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "lib/core/codecs.h"

namespace moepack::st {
namespace {

double value_at(DType t, const uint8_t* p) {
  switch (t) {
    case DType::F64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case DType::F32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::F16: return f16_to_float(static_cast<uint16_t>(p[0] | (p[1] << 8)));
    case DType::BF16: return bf16_to_float(static_cast<uint16_t>(p[0] | (p[1] << 8)));
    case DType::F8_E4M3: return e4m3_to_float(p[0]);
    case DType::F8_E5M2: return e5m2_to_float(p[0]);
    case DType::F8_E4M3FNUZ: return e4m3fnuz_to_float(p[0]);
    case DType::F8_E5M2FNUZ: return e5m2fnuz_to_float(p[0]);
    case DType::F8_E8M0: return e8m0_to_float(p[0]);
    default: return 0;  // not reached: dtype_has_values() guards every call
  }
}

uint64_t element_bytes(DType t) { return static_cast<uint64_t>(dtype_bits(t)) / 8; }

void compare_values(TensorComparison& c, uint64_t element, double va, double vb) {
  const bool nan_a = std::isnan(va), nan_b = std::isnan(vb);
  if ((nan_a && nan_b) || (!nan_a && !nan_b && va == vb)) return;
  ++c.differing_elements;
  if (!c.first_diff_element) c.first_diff_element = element;
  if (std::isfinite(va) && std::isfinite(vb)) c.max_abs_diff = std::max(c.max_abs_diff, std::fabs(va - vb));
  else ++c.nonfinite_mismatches;
}

}  // namespace

bool dtype_has_values(DType t) {
  switch (t) {
    case DType::F64: case DType::F32: case DType::F16: case DType::BF16: case DType::F8_E4M3: case DType::F8_E5M2:
    case DType::F8_E4M3FNUZ: case DType::F8_E5M2FNUZ: case DType::F8_E8M0:
      return true;
    default:
      return false;
  }
}

TensorComparison compare_tensors(const File& fa, const TensorInfo& a, const File& fb, const TensorInfo& b, uint64_t chunk_bytes) {
  TensorComparison c;
  c.dtype_differs = a.dtype != b.dtype;
  c.shape_differs = a.shape != b.shape;
  chunk_bytes = std::max<uint64_t>(chunk_bytes, 8);
  std::vector<uint8_t> ba, bb;

  if (!c.dtype_differs && a.num_bytes() == b.num_bytes()) {
    // Bytes, chunk by chunk; the values of a differing chunk are decoded element by element.
    c.bytes_compared = true;
    const bool values = dtype_has_values(a.dtype);
    c.values_compared = values;
    const uint64_t width = values ? element_bytes(a.dtype) : 1;
    const uint64_t step = chunk_bytes / width * width;
    ba.resize(static_cast<size_t>(std::min(step, a.num_bytes())));
    bb.resize(ba.size());
    for (uint64_t off = 0; off < a.num_bytes(); off += step) {
      const size_t n = static_cast<size_t>(std::min(step, a.num_bytes() - off));
      fa.read(a, off, std::span<uint8_t>(ba.data(), n));
      fb.read(b, off, std::span<uint8_t>(bb.data(), n));
      if (std::memcmp(ba.data(), bb.data(), n) == 0) continue;
      for (size_t i = 0; i < n; ++i)
        if (ba[i] != bb[i]) {
          if (!c.first_diff_byte) c.first_diff_byte = off + i;
          ++c.differing_bytes;
        }
      if (!values) continue;
      for (size_t i = 0; i < n; i += width)
        if (std::memcmp(ba.data() + i, bb.data() + i, width) != 0)
          compare_values(c, (off + i) / width, value_at(a.dtype, ba.data() + i), value_at(b.dtype, bb.data() + i));
    }
    return c;
  }

  if (dtype_has_values(a.dtype) && dtype_has_values(b.dtype) && a.num_elements() == b.num_elements()) {
    // Different float dtypes with as many elements: values only.
    c.values_compared = true;
    const uint64_t wa = element_bytes(a.dtype), wb = element_bytes(b.dtype);
    const uint64_t per_chunk = std::max<uint64_t>(1, chunk_bytes / std::max(wa, wb));
    const uint64_t count = a.num_elements();
    ba.resize(static_cast<size_t>(std::min(per_chunk, count) * wa));
    bb.resize(static_cast<size_t>(std::min(per_chunk, count) * wb));
    for (uint64_t first = 0; first < count; first += per_chunk) {
      const uint64_t n = std::min(per_chunk, count - first);
      fa.read(a, first * wa, std::span<uint8_t>(ba.data(), static_cast<size_t>(n * wa)));
      fb.read(b, first * wb, std::span<uint8_t>(bb.data(), static_cast<size_t>(n * wb)));
      for (uint64_t i = 0; i < n; ++i) compare_values(c, first + i, value_at(a.dtype, ba.data() + i * wa), value_at(b.dtype, bb.data() + i * wb));
    }
  }
  return c;
}

}  // namespace moepack::st
