// Per-expert outputs that are not an index map of one param: computed from several of an
// expert's loaded params (WNA16 act-order rows and sorted g_idx, FP8 Marlin scales, DeepGEMM
// SM100 scales, CPU INT8 compensation sums, CPU INT4 zero points and compensation sums),
// usually ending in a registered packer. The planner schedules them like packed tensors, the
// integrity check recomputes them, and the runtime reads them back through their last packer
// (derived_layout). The families' derivations live in wna16_marlin, fp8_marlin, fp8_deepgemm,
// cpu_int8, cpu_int4 and w4a8_cutlass; this is their common interface, and
// derivation_registry.h the table that finds one by its layout id.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "formats/checkpoints/checkpoint.h"
#include "lib/convert/executor.h"
#include "lib/convert/param_loader.h"
#include "lib/core/tensor.h"

namespace moepack::convert {

class ExpertDerivation {
 public:
  virtual ~ExpertDerivation() = default;
  virtual std::string name() const = 0;                 // manifest layout
  virtual std::vector<std::string> inputs() const = 0;  // roles read per expert (loaded)
  virtual DType dtype() const = 0;
  // `g` is the rank's loader geometry (sizes the output may need beyond its inputs' shapes).
  virtual std::vector<uint64_t> slab_shape(std::span<const OwnedTensor> inputs, const RankGeometry& g) const = 0;
  // `what` names the layer and expert for errors.
  virtual void produce(std::span<const OwnedTensor> inputs, const RankGeometry& g, std::span<uint8_t> out, const std::string& what) const = 0;
  // What the runtime unpacks the output to (its manifest `canonical`), when that is not the first
  // input's loaded form: a derivation followed by a packer unpacks through the packer.
  struct Unpacked {
    DType dtype;
    std::vector<uint64_t> shape;
  };
  virtual std::optional<Unpacked> unpacked(std::span<const OwnedTensor>, const RankGeometry&) const { return std::nullopt; }
  // The whole [E, ...] parameter's storage shape when it is not [E, slab...] (vLLM's 1-D packed
  // W4A8 scales); the bytes are still the slabs in expert order.
  virtual std::optional<std::vector<uint64_t>> parameter_shape(uint64_t, std::span<const OwnedTensor>, const RankGeometry&) const { return std::nullopt; }
  // A value stage the reference applies to the source param before computing (the manifest's
  // `canonical.value_stage`), when the derivation rounds values as vLLM does; "" for none. `g`
  // is the rank's geometry (a stage may depend on how tensor parallelism slices the param).
  virtual std::string reference_stage(const RankGeometry&) const { return ""; }
};

// nullptr when `layout_id` is no derivation (one lookup in derivation_registry's table).
// `available` are the layer's canonical params.
std::shared_ptr<const ExpertDerivation> make_expert_derivation(const std::string& role, const std::string& layout_id,
                                                               const std::set<std::string>& available, const ckpt::MoeLayer& layer);

// One expert's bytes of a derived output, from the source (the planner's producer; the
// integrity check recomputes it to compare).
void produce_derived_expert(const ckpt::Checkpoint& checkpoint, const ckpt::MoeLayer& layer, const ExpertDerivation& derivation, const RankGeometry& g,
                            uint64_t expert, std::span<uint8_t> out);

// Reading a derived output back (the runtime experts): what a layout id is.
enum class DerivedKind { none, empty, sorted_g_idx, sort_indices, act_order_weight, through_inner };
struct DerivedLayout {
  DerivedKind kind = DerivedKind::none;
  // act_order_weight: the Marlin repack applied after the gather; through_inner: the packer the
  // derived values go through last, whose inverse gives the manifest canonical.
  std::string inner;
};
DerivedLayout derived_layout(const std::string& layout_id);

// One rank's output tensor of a derived role.
PackedTensorPlan derived_tensor(const ckpt::Checkpoint& checkpoint, const ckpt::MoeLayer& layer, const std::string& role,
                                std::shared_ptr<const ExpertDerivation> derivation, const RankGeometry& g, uint64_t first_expert,
                                uint64_t local_experts);

}  // namespace moepack::convert
