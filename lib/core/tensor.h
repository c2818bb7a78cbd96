// Tensors that own their bytes (canonical params, packed outputs) and views into mapped files.
// Bytes are little-endian, row-major; the dtype says how to read them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lib/core/dtype.h"

namespace moepack {

struct TensorView {
  DType dtype = DType::U8;
  std::vector<uint64_t> shape;
  std::span<const uint8_t> bytes;
};

struct OwnedTensor {
  DType dtype = DType::U8;
  std::vector<uint64_t> shape;
  std::vector<uint8_t> bytes;

  OwnedTensor() = default;
  OwnedTensor(DType t, std::vector<uint64_t> s);  // zero-filled, sized from dtype and shape
  uint64_t num_elements() const;
  TensorView view() const { return {dtype, shape, bytes}; }
};

// Bytes for `shape` of `dtype` (sub-byte types must end on a byte boundary; throws internal otherwise).
uint64_t byte_size(DType dtype, std::span<const uint64_t> shape);
std::string shape_string(std::span<const uint64_t> shape);  // "[32, 5760, 1440]"
// A byte count for people, in powers of 1000 as checkpoint hubs show them: "423 MB", "1.69 GB".
std::string human_bytes(uint64_t n);

// Element i of a float tensor (F32, BF16, F16, F8_E8M0) as a float; Error(internal) for other dtypes.
float float_element(const OwnedTensor& t, uint64_t i);
// A float tensor cast to F32, BF16 or F16 as torch casts (round to nearest even; widening is exact).
OwnedTensor cast_float_tensor(const OwnedTensor& t, DType to);
// The values of an I32 or I64 tensor (ids, tables), widened to int64; Error(internal) for others.
std::vector<int64_t> integer_values(const OwnedTensor& t);

}  // namespace moepack
