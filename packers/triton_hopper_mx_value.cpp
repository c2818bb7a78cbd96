// See triton_hopper_mx_value.h for the drawn layout and the upstream definition.
#include "packers/triton_hopper_mx_value.h"

namespace moepack::packers {
namespace {

uint16_t twiddle_lane(const uint8_t (&nibbles)[4]) {
  uint16_t lane = 0;
  for (int slot = 0; slot < 4; ++slot)
    for (int bit = 0; bit < 4; ++bit)
      if ((nibbles[slot] >> bit) & 1)
        lane = static_cast<uint16_t>(lane | (1u << TritonHopperMXValueLayout::kLaneBit[slot][bit]));
  return lane;
}

// The twiddle is linear over bits, so a group's word is the OR of each byte's own contribution:
// one 256-entry table per byte slot (4 KiB) replaces 32 bit tests per byte on the bulk path.
// The tables are built from kLaneBit, the definition the visit uses, so they cannot drift from it.
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

// Visits every 4-byte group of the storage in order, with the canonical (n, b) of its first
// byte; the group's bytes are (n,b) (n+8,b) (n,b+4) (n+8,b+4) (w1 = byte/2, w0 = byte%2).
template <class Fn>
void for_each_group(uint64_t padded_rows, uint64_t padded_bytes, Fn&& fn) {
  using L = TritonHopperMXValueLayout;
  uint64_t out = 0;
  for (uint64_t m0 = 0; m0 < padded_rows / L::kRowAlign; ++m0)
    for (uint64_t t0 = 0; t0 < 4; ++t0)
      for (uint64_t k0 = 0; k0 < padded_bytes / L::kByteAlign; ++k0)
        for (uint64_t s0 = 0; s0 < 2; ++s0)
          for (uint64_t t1 = 0; t1 < 4; ++t1)
            for (uint64_t kt = 0; kt < 4; ++kt, out += 4) fn(out, 16 * m0 + 2 * t0 + s0, 32 * k0 + 8 * kt + t1);
}

}  // namespace

std::string TritonHopperMXValueLayout::name() const {
  return "triton_kernels.HopperMXValue(mx_axis=1," + std::string(pins::kTritonKernels) + ")";
}

uint32_t TritonHopperMXValueLayout::twiddle(std::array<uint8_t, 4> group) {
  const TwiddleTables& t = twiddle_tables();
  return t.by_slot[0][group[0]] | t.by_slot[1][group[1]] | t.by_slot[2][group[2]] | t.by_slot[3][group[3]];
}

// Walks the storage group by group (sequential writes) and twiddles each group by table.
void TritonHopperMXValueLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  expect_pack_args(canonical, packed);
  const uint64_t rows = canonical.shape[0], bytes = canonical.shape[1];
  const uint8_t* q = canonical.bytes.data();
  auto at = [&](uint64_t n, uint64_t b) -> uint8_t { return n < rows && b < bytes ? q[n * bytes + b] : 0; };
  for_each_group(round_up(rows, kRowAlign), round_up(bytes, kByteAlign), [&](uint64_t out, uint64_t n, uint64_t b) {
    const uint32_t word = twiddle({at(n, b), at(n + 8, b), at(n, b + 4), at(n + 8, b + 4)});
    for (int i = 0; i < 4; ++i) packed[out + i] = static_cast<uint8_t>(word >> (8 * i));
  });
}

}  // namespace moepack::packers
