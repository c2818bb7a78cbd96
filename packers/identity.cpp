#include "packers/identity.h"

namespace moepack::packers {

Accepts UnchangedLayout::accepts() const {
  Accepts a;
  a.dtypes = Accepts::Dtypes::any;
  a.ranks = Accepts::kAnyRank;
  a.allows_empty = true;  // a parameter vLLM keeps as loaded may be anything, even empty
  return a;
}

void UnchangedLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  expect_pack_args(canonical, packed);
  // std::copy, not memcpy: an empty tensor has null data pointers, which memcpy may not take.
  std::copy(canonical.bytes.begin(), canonical.bytes.end(), packed.begin());
}

}  // namespace moepack::packers
