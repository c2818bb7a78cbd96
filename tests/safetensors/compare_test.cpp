// st::compare_tensors (behind `moepack diff`): exact byte offsets across chunk boundaries,
// decoded values with exact maxima, NaN and signed zeros, reshapes, and different float dtypes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "formats/safetensors/compare.h"
#include "formats/safetensors/writer.h"
#include "lib/core/codecs.h"
#include "support/test_support.h"

namespace moepack::st {
namespace {

struct T {
  DType dtype;
  std::vector<uint64_t> shape;
  std::vector<uint8_t> bytes;
};

// One file holding tensor "t".
std::string one_tensor(const test::TempDir& dir, const std::string& name, const T& t) {
  const std::string path = dir.file(name);
  Writer w(path, {{"t", t.dtype, t.shape}});
  w.write(t.bytes);
  w.commit();
  return path;
}

T f32(std::vector<uint64_t> shape, const std::vector<float>& v) {
  T t{DType::F32, std::move(shape), std::vector<uint8_t>(v.size() * 4)};
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}
T bf16(std::vector<uint64_t> shape, const std::vector<float>& v) {
  T t{DType::BF16, std::move(shape), {}};
  for (float x : v) {
    const uint16_t b = float_to_bf16(x);
    t.bytes.push_back(static_cast<uint8_t>(b & 0xFF));
    t.bytes.push_back(static_cast<uint8_t>(b >> 8));
  }
  return t;
}

TensorComparison compare(const T& a, const T& b, uint64_t chunk = kCompareChunkBytes) {
  test::TempDir dir;
  File fa(one_tensor(dir, "a.safetensors", a)), fb(one_tensor(dir, "b.safetensors", b));
  return compare_tensors(fa, *fa.find("t"), fb, *fb.find("t"), chunk);
}

TEST(CompareTensors, IdenticalBytesAreIdentical) {
  T a{DType::U8, {3, 5}, std::vector<uint8_t>(15, 7)};
  TensorComparison c = compare(a, a);
  EXPECT_TRUE(c.identical());
  EXPECT_TRUE(c.bytes_compared);
  EXPECT_FALSE(c.values_compared) << "packed bytes have no values";
  EXPECT_FALSE(c.first_diff_byte);
}

TEST(CompareTensors, FirstDifferingByteIsExactAcrossChunks) {
  std::vector<uint8_t> base(1000);
  for (size_t i = 0; i < base.size(); ++i) base[i] = static_cast<uint8_t>(i * 31);
  for (uint64_t chunk : {uint64_t{8}, uint64_t{64}, uint64_t{999}, kCompareChunkBytes}) {
    SCOPED_TRACE(chunk);
    std::vector<uint8_t> changed = base;
    changed[517] ^= 0x10;
    changed[518] ^= 0x01;
    changed[999] ^= 0xFF;
    TensorComparison c = compare({DType::U8, {1000}, base}, {DType::U8, {1000}, changed}, chunk);
    EXPECT_FALSE(c.identical());
    ASSERT_TRUE(c.first_diff_byte);
    EXPECT_EQ(*c.first_diff_byte, 517u);
    EXPECT_EQ(c.differing_bytes, 3u);
  }
}

TEST(CompareTensors, FloatValuesDecodedWithTheExactMaximum) {
  std::vector<float> a(300), b;
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) * 0.25f - 30.0f;
  b = a;
  b[100] += 0.5f;
  b[250] -= 4.0f;
  for (uint64_t chunk : {uint64_t{8}, uint64_t{20}, kCompareChunkBytes}) {
    SCOPED_TRACE(chunk);
    TensorComparison c = compare(f32({300}, a), f32({300}, b), chunk);
    EXPECT_TRUE(c.bytes_compared);
    EXPECT_TRUE(c.values_compared);
    EXPECT_EQ(c.differing_elements, 2u);
    ASSERT_TRUE(c.first_diff_element);
    EXPECT_EQ(*c.first_diff_element, 100u);
    EXPECT_EQ(*c.first_diff_byte / 4, 100u);
    EXPECT_DOUBLE_EQ(c.max_abs_diff, 4.0);
  }
  // BF16 and the 8-bit floats decode through lib/core/codecs.h.
  TensorComparison h = compare(bf16({4}, {1, 2, 3, 4}), bf16({4}, {1, 2, 3.5f, 4}));
  EXPECT_DOUBLE_EQ(h.max_abs_diff, 0.5);
  TensorComparison e = compare({DType::F8_E4M3, {2}, {0x38, 0x38}}, {DType::F8_E4M3, {2}, {0x38, 0x40}});  // 1.0 and 2.0
  EXPECT_EQ(e.differing_elements, 1u);
  EXPECT_DOUBLE_EQ(e.max_abs_diff, 1.0);
  TensorComparison m = compare({DType::F8_E5M2, {1}, {0x3C}}, {DType::F8_E5M2, {1}, {0x44}});  // 1.0 and 4.0
  EXPECT_DOUBLE_EQ(m.max_abs_diff, 3.0);
}

TEST(CompareTensors, NanAndSignedZero) {
  const float nan = std::nanf("");
  T a = f32({4}, {nan, 0.0f, 1.0f, INFINITY});
  T b = f32({4}, {nan, -0.0f, nan, INFINITY});
  b.bytes[0] ^= 0x01;  // another NaN payload
  TensorComparison c = compare(a, b);
  EXPECT_EQ(c.differing_bytes, 4u) << "payload (1), sign of zero (1), 1.0 vs NaN (2)";
  EXPECT_EQ(*c.first_diff_byte, 0u);
  EXPECT_EQ(c.differing_elements, 1u) << "NaN equals NaN, +0 equals -0";
  EXPECT_EQ(*c.first_diff_element, 2u);
  EXPECT_EQ(c.nonfinite_mismatches, 1u);
  EXPECT_EQ(c.max_abs_diff, 0.0);
}

TEST(CompareTensors, ReshapesAndOtherFloatDtypes) {
  const std::vector<float> v = {1, 2, 3, 4, 5, 6};
  TensorComparison reshaped = compare(f32({2, 3}, v), f32({3, 2}, v));
  EXPECT_TRUE(reshaped.shape_differs);
  EXPECT_FALSE(reshaped.identical());
  EXPECT_TRUE(reshaped.bytes_compared);
  EXPECT_EQ(reshaped.differing_bytes, 0u);

  TensorComparison widened = compare(bf16({2, 3}, v), f32({2, 3}, {1, 2, 3, 4, 5, 6.25f}));
  EXPECT_TRUE(widened.dtype_differs);
  EXPECT_FALSE(widened.bytes_compared);
  EXPECT_TRUE(widened.values_compared);
  EXPECT_EQ(widened.differing_elements, 1u);
  EXPECT_EQ(*widened.first_diff_element, 5u);
  EXPECT_DOUBLE_EQ(widened.max_abs_diff, 0.25);

  TensorComparison sizes = compare(f32({6}, v), f32({5}, {1, 2, 3, 4, 5}));
  EXPECT_FALSE(sizes.bytes_compared);
  EXPECT_FALSE(sizes.values_compared);
  EXPECT_FALSE(sizes.identical());
  TensorComparison packed = compare({DType::U8, {4}, {1, 2, 3, 4}}, {DType::I32, {1}, {1, 2, 3, 4}});
  EXPECT_FALSE(packed.bytes_compared) << "different dtypes are not compared as bytes";
  EXPECT_FALSE(packed.values_compared);
}

}  // namespace
}  // namespace moepack::st
