// See triton_hopper_mx_value.h for the drawn layout and the upstream definition.
#include "packers/triton_hopper_mx_value.h"

#include "packers/triton_common.h"

namespace moepack::packers {
namespace {

constexpr uint64_t kRowAlign = 16;   // M tile of the swizzle: 2 (scott trick) * 4 threads * 2 warps
constexpr uint64_t kByteAlign = 32;  // K tile in bytes: 4 threads * 2 warps * 4 k-subtiles

// One nibble placed in a 16-bit lane. Position tables per slot (x0..x3) of the group:
// bit 3 of the nibble is the sign, bits 2..0 the E2M1 exponent/mantissa.
struct NibbleBits {
  uint8_t bit_of[4];  // destination bit (0..15) of nibble bit 0, 1, 2, 3
};
constexpr NibbleBits kSlot[4] = {
    {{6, 7, 8, 15}},    // x0
    {{3, 4, 5, 12}},    // x1
    {{0, 1, 2, 9}},     // x2
    {{13, 10, 11, 14}}, // x3: the irregular one, its bits fill the holes the others leave
};

uint16_t twiddle_lane(const uint8_t (&nibbles)[4]) {
  uint16_t lane = 0;
  for (int slot = 0; slot < 4; ++slot)
    for (int bit = 0; bit < 4; ++bit)
      if ((nibbles[slot] >> bit) & 1) lane = static_cast<uint16_t>(lane | (1u << kSlot[slot].bit_of[bit]));
  return lane;
}

void untwiddle_lane(uint16_t lane, uint8_t (&nibbles)[4]) {
  for (int slot = 0; slot < 4; ++slot) {
    nibbles[slot] = 0;
    for (int bit = 0; bit < 4; ++bit)
      if ((lane >> kSlot[slot].bit_of[bit]) & 1) nibbles[slot] = static_cast<uint8_t>(nibbles[slot] | (1u << bit));
  }
}

struct Geometry {
  uint64_t rows, bytes;             // canonical N, Kb
  uint64_t padded_rows, padded_bytes;  // Np, Kbp
  uint64_t out_rows() const { return padded_rows / 4; }
  uint64_t out_cols() const { return padded_bytes * 4; }
};

Geometry geometry(const std::string& layout, DType dtype, std::span<const uint64_t> shape) {
  detail::Matrix m = detail::expect_byte_matrix(layout, dtype, shape);
  return {m.rows, m.cols, detail::round_up(m.rows, kRowAlign), detail::round_up(m.cols, kByteAlign)};
}

// Visits every 4-byte group of the storage in order, with the canonical (n, b) of its first
// byte; the group's bytes are (n,b) (n+8,b) (n,b+4) (n+8,b+4) (w1 = byte/2, w0 = byte%2).
template <class Fn>
void for_each_group(const Geometry& g, Fn&& fn) {
  uint64_t out = 0;
  for (uint64_t m0 = 0; m0 < g.padded_rows / kRowAlign; ++m0)
    for (uint64_t t0 = 0; t0 < 4; ++t0)
      for (uint64_t k0 = 0; k0 < g.padded_bytes / kByteAlign; ++k0)
        for (uint64_t s0 = 0; s0 < 2; ++s0)
          for (uint64_t t1 = 0; t1 < 4; ++t1)
            for (uint64_t kt = 0; kt < 4; ++kt, out += 4)
              fn(out, 16 * m0 + 2 * t0 + s0, 32 * k0 + 8 * kt + t1);
}

}  // namespace

std::string TritonHopperMXValueLayout::name() const {
  return "triton_kernels.HopperMXValue(mx_axis=1," + std::string(detail::kTritonKernelsVersion) + ")";
}

std::vector<uint64_t> TritonHopperMXValueLayout::packed_shape(std::span<const uint64_t> canonical_shape) const {
  Geometry g = geometry(name(), DType::U8, canonical_shape);
  return {g.out_rows(), g.out_cols()};
}

uint64_t TritonHopperMXValueLayout::pretwiddle_offset(std::span<const uint64_t> canonical_shape, uint64_t n, uint64_t b) {
  const uint64_t m0 = n / 16, w0 = n / 8 % 2, t0 = n / 2 % 4, s0 = n % 2;
  const uint64_t k0 = b / 32, kt = b / 8 % 4, w1 = b / 4 % 2, t1 = b % 4;
  const uint64_t out_cols = detail::round_up(canonical_shape[1], kByteAlign) * 4;
  return (4 * m0 + t0) * out_cols + 128 * k0 + 64 * s0 + 16 * t1 + 4 * kt + 2 * w1 + w0;
}

// The twiddle is linear over bits, so a group's word is the OR of each byte's own contribution:
// one 256-entry table per byte slot (4 KiB) replaces 32 bit tests per byte on the bulk path.
// The tables are built from twiddle_lane, the definition, so they cannot drift from it.
namespace {
struct TwiddleTables {
  uint32_t by_slot[4][256];
  TwiddleTables() {
    for (int slot = 0; slot < 4; ++slot)
      for (int byte = 0; byte < 256; ++byte) {
        uint8_t low[4] = {0, 0, 0, 0}, high[4] = {0, 0, 0, 0};
        low[slot] = static_cast<uint8_t>(byte & 0xF);
        high[slot] = static_cast<uint8_t>(byte >> 4);
        by_slot[slot][byte] = static_cast<uint32_t>(twiddle_lane(low)) | (static_cast<uint32_t>(twiddle_lane(high)) << 16);
      }
  }
};
const TwiddleTables& twiddle_tables() {
  static const TwiddleTables tables;
  return tables;
}
}  // namespace

uint32_t TritonHopperMXValueLayout::twiddle(std::array<uint8_t, 4> group) {
  const TwiddleTables& t = twiddle_tables();
  return t.by_slot[0][group[0]] | t.by_slot[1][group[1]] | t.by_slot[2][group[2]] | t.by_slot[3][group[3]];
}

std::array<uint8_t, 4> TritonHopperMXValueLayout::untwiddle(uint32_t word) {
  uint8_t low[4], high[4];
  untwiddle_lane(static_cast<uint16_t>(word & 0xFFFF), low);
  untwiddle_lane(static_cast<uint16_t>(word >> 16), high);
  std::array<uint8_t, 4> group{};
  for (int i = 0; i < 4; ++i) group[i] = static_cast<uint8_t>(low[i] | (high[i] << 4));
  return group;
}

void TritonHopperMXValueLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  const Geometry g = geometry(name(), canonical.dtype, canonical.shape);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), g.rows * g.bytes);
  detail::expect_bytes(name(), "packed", packed.size(), g.out_rows() * g.out_cols());
  const uint8_t* q = canonical.bytes.data();
  auto at = [&](uint64_t n, uint64_t b) -> uint8_t { return n < g.rows && b < g.bytes ? q[n * g.bytes + b] : 0; };
  for_each_group(g, [&](uint64_t out, uint64_t n, uint64_t b) {
    const uint32_t word = twiddle({at(n, b), at(n + 8, b), at(n, b + 4), at(n + 8, b + 4)});
    for (int i = 0; i < 4; ++i) packed[out + i] = static_cast<uint8_t>(word >> (8 * i));
  });
}

void TritonHopperMXValueLayout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  const Geometry g = geometry(name(), canonical.dtype, canonical.shape);
  detail::expect_bytes(name(), "canonical", canonical.bytes.size(), g.rows * g.bytes);
  detail::expect_bytes(name(), "packed", packed.size(), g.out_rows() * g.out_cols());
  uint8_t* q = canonical.bytes.data();
  auto put = [&](uint64_t n, uint64_t b, uint8_t v) {
    if (n < g.rows && b < g.bytes) q[n * g.bytes + b] = v;
  };
  for_each_group(g, [&](uint64_t out, uint64_t n, uint64_t b) {
    uint32_t word = 0;
    for (int i = 0; i < 4; ++i) word |= static_cast<uint32_t>(packed[out + i]) << (8 * i);
    const std::array<uint8_t, 4> group = untwiddle(word);
    put(n, b, group[0]);
    put(n + 8, b, group[1]);
    put(n, b + 4, group[2]);
    put(n + 8, b + 4, group[3]);
  });
}

}  // namespace moepack::packers
