// Test-only helpers for the triton_kernels and CPU packer tests: deterministic random bytes,
// round-trip checking, and a small emulation of the torch ops the upstream swizzles are built
// from (zero pad, view as sizes, permute, contiguous). Feeding the upstream sizes and
// permutation lists through `permute_contiguous` gives an expected storage that does not
// depend on the packers' own index maps.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "lib/core/error.h"
#include "lib/core/tensor.h"
#include "packers/layout.h"

namespace moepack::packers::testing {

inline std::vector<uint8_t> random_bytes(uint64_t count, uint64_t seed) {
  std::vector<uint8_t> out(count);
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& b : out) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    b = static_cast<uint8_t>(state >> 24);
  }
  return out;
}

inline OwnedTensor random_tensor(DType dtype, std::vector<uint64_t> shape, uint64_t seed) {
  OwnedTensor t(dtype, std::move(shape));
  t.bytes = random_bytes(t.bytes.size(), seed);
  return t;
}

// Row-major [rows, cols] zero-padded to [padded_rows, padded_cols] (torch.nn.functional.pad).
inline std::vector<uint8_t> pad_matrix(const std::vector<uint8_t>& in, uint64_t rows, uint64_t cols,
                                       uint64_t padded_rows, uint64_t padded_cols) {
  std::vector<uint8_t> out(padded_rows * padded_cols, 0);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < cols; ++c) out[r * padded_cols + c] = in[r * cols + c];
  return out;
}

// torch: data.view(sizes).permute(perm).contiguous(), returning the bytes.
inline std::vector<uint8_t> permute_contiguous(const std::vector<uint8_t>& in, const std::vector<uint64_t>& sizes,
                                               const std::vector<int>& perm) {
  const size_t rank = sizes.size();
  std::vector<uint64_t> in_strides(rank, 1);
  for (size_t i = rank - 1; i-- > 0;) in_strides[i] = in_strides[i + 1] * sizes[i + 1];
  EXPECT_EQ(in_strides[0] * sizes[0], in.size()) << "view sizes do not cover the buffer";
  std::vector<uint64_t> out_sizes(rank);
  for (size_t i = 0; i < rank; ++i) out_sizes[i] = sizes[static_cast<size_t>(perm[i])];
  std::vector<uint8_t> out(in.size());
  std::vector<uint64_t> index(rank, 0);  // odometer over the output's row-major order
  for (uint64_t o = 0; o < out.size(); ++o) {
    uint64_t src = 0;
    for (size_t i = 0; i < rank; ++i) src += index[i] * in_strides[static_cast<size_t>(perm[i])];
    out[o] = in[src];
    for (size_t i = rank; i-- > 0;) {
      if (++index[i] < out_sizes[i]) break;
      index[i] = 0;
    }
  }
  return out;
}

inline std::vector<uint8_t> pack_all(const Layout& layout, const OwnedTensor& canonical) {
  OwnedTensor packed(layout.packed_dtype(canonical.dtype), layout.packed_shape(canonical.shape));
  layout.pack(canonical.view(), packed.bytes);
  return packed.bytes;
}

// pack -> unpack returns the canonical bytes; the packed buffer has the advertised size.
inline void expect_round_trip(const Layout& layout, DType dtype, std::vector<uint64_t> shape, uint64_t seed) {
  SCOPED_TRACE(layout.name() + " shape " + shape_string(shape));
  const OwnedTensor canonical = random_tensor(dtype, shape, seed);
  const std::vector<uint8_t> packed = pack_all(layout, canonical);
  EXPECT_EQ(packed.size(), byte_size(layout.packed_dtype(dtype), layout.packed_shape(shape)));
  OwnedTensor back(dtype, shape);
  layout.unpack(packed, back);
  EXPECT_EQ(back.bytes, canonical.bytes);
}

template <class Fn>
int error_kind_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return static_cast<int>(e.kind());
  }
  return -1;  // nothing thrown
}

// A dtype the layout forbids is refused by pack with a moepack::Error of kind bad_input.
inline void expect_dtype_refused(const Layout& layout, DType dtype, std::vector<uint64_t> shape) {
  SCOPED_TRACE(layout.name() + " dtype " + std::string(dtype_name(dtype)));
  OwnedTensor canonical(dtype, shape);
  std::vector<uint8_t> packed(1 << 16);
  EXPECT_EQ(error_kind_of([&] { layout.pack(canonical.view(), packed); }), static_cast<int>(ErrorKind::bad_input));
}

// A shape the layout forbids is refused with a moepack::Error of kind bad_input, by
// packed_shape and by pack alike.
inline void expect_refused(const Layout& layout, DType dtype, std::vector<uint64_t> shape) {
  SCOPED_TRACE(layout.name() + " shape " + shape_string(shape));
  EXPECT_EQ(error_kind_of([&] { layout.packed_shape(shape); }), static_cast<int>(ErrorKind::bad_input));
  expect_dtype_refused(layout, dtype, shape);
}

}  // namespace moepack::packers::testing
