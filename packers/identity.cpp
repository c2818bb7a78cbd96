#include "packers/identity.h"

#include <algorithm>

#include "lib/core/error.h"

namespace moepack::packers {

void UnchangedLayout::pack(const TensorView& canonical, std::span<uint8_t> packed) const {
  if (packed.size() != canonical.bytes.size())
    throw_internal("vllm.unchanged: " + std::to_string(canonical.bytes.size()) + " canonical bytes, " + std::to_string(packed.size()) + " packed");
  std::copy(canonical.bytes.begin(), canonical.bytes.end(), packed.begin());
}

void UnchangedLayout::unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const {
  if (packed.size() != canonical.bytes.size())
    throw_internal("vllm.unchanged: " + std::to_string(packed.size()) + " packed bytes, " + std::to_string(canonical.bytes.size()) + " canonical");
  std::copy(packed.begin(), packed.end(), canonical.bytes.begin());
}

}  // namespace moepack::packers
