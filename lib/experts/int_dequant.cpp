#include "lib/experts/int_dequant.h"

#include <array>
#include <cstring>

#include "lib/core/error.h"
#include "lib/experts/dequant.h"

namespace moepack::experts {
namespace {

// AutoAWQ packs logical column j of a word into field awq_field(j).
constexpr std::array<unsigned, 8> kAwqField4 = {0, 4, 1, 5, 2, 6, 3, 7};
constexpr std::array<unsigned, 4> kAwqField8 = {0, 2, 1, 3};

uint32_t word_at(const OwnedTensor& t, uint64_t i) {
  uint32_t v;
  std::memcpy(&v, t.bytes.data() + 4 * i, 4);
  return v;
}

uint32_t field(uint32_t word, unsigned index, unsigned bits) { return (word >> (index * bits)) & ((1u << bits) - 1); }

unsigned awq_field(unsigned bits, uint64_t j) { return bits == 4 ? kAwqField4[j % 8] : kAwqField8[j % 4]; }

void expect_shape(const OwnedTensor& t, std::vector<uint64_t> shape, const char* what, const std::string& where) {
  if (t.shape != shape)
    throw Error(ErrorKind::bad_input, where + ": " + what + " is " + shape_string(t.shape) + ", expected " + shape_string(shape));
}

}  // namespace

unsigned int_weight_bits(const IntWeight& w, uint64_t n, uint64_t k, const std::string& where) {
  if (!w.codes || w.codes->dtype != DType::I32 || w.codes->shape.size() != 2)
    throw Error(ErrorKind::bad_input, where + ": integer weight codes must be a 2-D I32 tensor");
  const uint64_t rows = w.codes->shape[0], cols = w.codes->shape[1];
  for (unsigned bits : {4u, 8u}) {
    const uint64_t pf = 32 / bits;
    if (w.packing == IntPacking::k_packed && rows * pf == k && cols == n) return bits;
    if (w.packing == IntPacking::awq && rows == k && cols * pf == n) return bits;
  }
  throw Error(ErrorKind::bad_input, where + ": integer weight codes " + shape_string(w.codes->shape) + " are no 4- or 8-bit packing of a [" +
                                        std::to_string(n) + " out, " + std::to_string(k) + " in] weight");
}

std::vector<float> dequantize_int(const IntWeight& w, uint64_t n, uint64_t k, const std::string& where) {
  const unsigned bits = int_weight_bits(w, n, k, where);
  const uint64_t pf = 32 / bits;
  if (!w.scales || w.scales->shape.size() != 2 || w.scales->shape[1] != n || w.scales->shape[0] == 0)
    throw Error(ErrorKind::bad_input, where + ": integer weight scales must be [groups, " + std::to_string(n) + "]");
  const uint64_t groups = w.scales->shape[0];
  const std::vector<float> scale = float_values(*w.scales);
  if (w.zero_values) {
    if (w.zero_values->dtype != DType::I8) throw Error(ErrorKind::bad_input, where + ": unpacked zero points must be I8");
    expect_shape(*w.zero_values, {groups, n}, "the unpacked zero points", where);
  } else if (w.zeros) {
    if (w.zeros->dtype != DType::I32) throw Error(ErrorKind::bad_input, where + ": zero points must be I32");
    expect_shape(*w.zeros, {groups, n / pf}, "the zero points", where);
  }
  std::vector<uint64_t> group_of(static_cast<size_t>(k));
  if (w.g_idx) {
    if (w.g_idx->dtype != DType::I32) throw Error(ErrorKind::bad_input, where + ": g_idx must be I32");
    expect_shape(*w.g_idx, {k}, "g_idx", where);
    for (uint64_t i = 0; i < k; ++i) {
      const int32_t g = static_cast<int32_t>(word_at(*w.g_idx, i));
      if (g < 0 || static_cast<uint64_t>(g) >= groups)
        throw Error(ErrorKind::bad_input, where + ": g_idx element " + std::to_string(i) + " is " + std::to_string(g) + ", outside the " +
                                              std::to_string(groups) + " scale groups");
      group_of[i] = static_cast<uint64_t>(g);
    }
  } else {
    if (k % groups) throw Error(ErrorKind::bad_input, where + ": " + std::to_string(groups) + " scale groups do not divide " + std::to_string(k) + " inputs");
    const uint64_t group_size = k / groups;
    for (uint64_t i = 0; i < k; ++i) group_of[i] = i / group_size;
  }
  const uint32_t symmetric_zero = 1u << (bits - 1);
  std::vector<float> out(static_cast<size_t>(n * k));
  for (uint64_t kk = 0; kk < k; ++kk) {
    const uint64_t g = group_of[kk];
    for (uint64_t nn = 0; nn < n; ++nn) {
      const uint32_t code = w.packing == IntPacking::k_packed ? field(word_at(*w.codes, (kk / pf) * n + nn), static_cast<unsigned>(kk % pf), bits)
                                                              : field(word_at(*w.codes, kk * (n / pf) + nn / pf), awq_field(bits, nn), bits);
      int32_t zero = static_cast<int32_t>(symmetric_zero);
      if (w.zero_values) {
        zero = static_cast<int8_t>(w.zero_values->bytes[g * n + nn]);
      } else if (w.zeros) {
        const uint32_t word = word_at(*w.zeros, g * (n / pf) + nn / pf);
        zero = static_cast<int32_t>(w.packing == IntPacking::k_packed ? field(word, static_cast<unsigned>(nn % pf), bits)
                                                                      : field(word, awq_field(bits, nn), bits));
      }
      out[nn * k + kk] = (static_cast<float>(code) - static_cast<float>(zero)) * scale[g * n + nn];
    }
  }
  return out;
}

std::vector<float> dequantize_int4_table(const OwnedTensor& codes, const OwnedTensor& table, uint64_t n, uint64_t k, const std::string& where) {
  if (codes.dtype != DType::I32 || k % 8) throw Error(ErrorKind::bad_input, where + ": W4A8 int4 codes must be I32 [N, K/8]");
  expect_shape(codes, {n, k / 8}, "the int4 codes", where);
  if (table.dtype != DType::F32 || table.shape.size() != 2 || table.shape[0] != n || table.shape[1] == 0 || table.shape[1] % 16)
    throw Error(ErrorKind::bad_input, where + ": the W4A8 value table must be F32 [" + std::to_string(n) + ", 16 x groups], got " + shape_string(table.shape));
  const uint64_t groups = table.shape[1] / 16;
  if (k % groups) throw Error(ErrorKind::bad_input, where + ": " + std::to_string(groups) + " groups do not divide " + std::to_string(k) + " inputs");
  const uint64_t group_size = k / groups;
  std::vector<float> values(static_cast<size_t>(n * 16 * groups));
  std::memcpy(values.data(), table.bytes.data(), values.size() * 4);
  std::vector<float> out(static_cast<size_t>(n * k));
  for (uint64_t r = 0; r < n; ++r)
    for (uint64_t c = 0; c < k; ++c) {
      const uint32_t code = field(word_at(codes, r * (k / 8) + c / 8), static_cast<unsigned>(c % 8), 4);
      out[r * k + c] = values[(r * groups + c / group_size) * 16 + code];
    }
  return out;
}

}  // namespace moepack::experts
