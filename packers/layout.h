// The common shape of every packer: a layout transform of ONE expert's canonical tensor.
//
// Canonical tensors are what vLLM's loader holds for one expert before
// process_weights_after_loading (docs/ARCHITECTURE.md "canonical params"), already zero-padded to
// the backend's sizes: e.g. w13 weight U8 [2I, H/2] (two FP4 codes per byte, low nibble = even
// column), w13 scale U8 [2I, H/32] (E8M0). A packed [E, ...] parameter is the concatenation of
// the per-expert packed slabs, expert 0 first, so the converter streams expert by expert.
//
// Every layout is defined once as an index map (canonical element -> packed position, see
// packers/index_map.h, the base every packer derives from); `pack` and `unpack` (the exact
// inverse, used by the emulation experts on one expert's slab at a time, and by the artifact
// check) are derived from it, `name` is the manifest's `layout` string.
//
// There is no canonical_shape(packed shape): it is not derivable for every layout. Padding
// layouts map several canonical sizes to one packed size (triton_kernels.Strided with
// k_groups_pad=4 packs [N, 5] .. [N, 8] to [N, 8]; BlackwellMXValue pads K/2 to 128, Hopper
// and Blackwell scales pad N and K/32, DeepGEMM pads MN to 4, AITER scales pad K/32 to 8), so
// a reader of an artifact takes the canonical shape from the manifest, not from the slab.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lib/core/dtype.h"
#include "lib/core/tensor.h"

namespace moepack::packers {

class Layout {
 public:
  virtual ~Layout() = default;
  // The manifest string, naming the transform, its parameters and the reference version,
  // e.g. "triton_kernels.HopperMXValue(mx_axis=1,v3.5.1)".
  virtual std::string name() const = 0;
  // Storage dtype and per-expert storage shape of the packed tensor for a canonical tensor.
  virtual DType packed_dtype(DType canonical) const = 0;
  virtual std::vector<uint64_t> packed_shape(std::span<const uint64_t> canonical_shape) const = 0;
  // `packed` has exactly byte_size(packed_dtype, packed_shape) bytes; padding bytes are written too.
  virtual void pack(const TensorView& canonical, std::span<uint8_t> packed) const = 0;
  // Inverse of pack: fills `canonical` (its dtype and shape set by the caller, bytes sized).
  virtual void unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const = 0;
  // Shape of the whole [E, ...] parameter as vLLM holds it (the manifest's `shape`). The bytes
  // are always the per-expert slabs concatenated; only the shape can differ from the default
  // [E, packed_shape...], e.g. triton_kernels' BlackwellMXScale storage is [1, E*Np/128, Kp/4, 2, 256].
  virtual std::vector<uint64_t> parameter_shape(uint64_t num_experts, std::span<const uint64_t> canonical_shape) const {
    std::vector<uint64_t> shape = packed_shape(canonical_shape);
    shape.insert(shape.begin(), num_experts);
    return shape;
  }
};

}  // namespace moepack::packers
