// Two tensors compared in bounded chunks (`moepack diff`): the bytes when dtype and size agree
// (how many differ, the first differing offset), and the values after decoding when both
// dtypes are floats with a codec (max abs difference). Memory use is two chunks, whatever the
// tensors' sizes; data are read with File::read, so a file that shrinks is an error, not a fault.
#pragma once

#include <cstdint>
#include <optional>

#include "formats/safetensors/file.h"

namespace moepack::st {

// The dtypes whose elements decode to a number through lib/core/codecs.h (or are one): F64,
// F32, F16, BF16, F8_E4M3, F8_E5M2, F8_E4M3FNUZ, F8_E5M2FNUZ, F8_E8M0. Packed bytes (U8),
// integers and the sub-byte F4/F6 types are compared as bytes only.
bool dtype_has_values(DType t);

struct TensorComparison {
  bool dtype_differs = false;
  bool shape_differs = false;
  // Bytes were compared: same dtype and same byte count (a reshape is compared too).
  bool bytes_compared = false;
  uint64_t differing_bytes = 0;
  std::optional<uint64_t> first_diff_byte;  // offset inside the tensor's data
  // Values were compared: both dtypes have values and the element counts agree.
  bool values_compared = false;
  uint64_t differing_elements = 0;          // values that are not equal (NaN equals NaN; +0 equals -0)
  std::optional<uint64_t> first_diff_element;
  double max_abs_diff = 0;                  // over the differing elements where both values are finite
  uint64_t nonfinite_mismatches = 0;        // differing elements where either value is NaN or infinite
  // Same dtype, same shape, same bytes.
  bool identical() const { return !dtype_differs && !shape_differs && bytes_compared && differing_bytes == 0; }
};

inline constexpr uint64_t kCompareChunkBytes = 4u << 20;

TensorComparison compare_tensors(const File& fa, const TensorInfo& a, const File& fb, const TensorInfo& b, uint64_t chunk_bytes = kCompareChunkBytes);

}  // namespace moepack::st
