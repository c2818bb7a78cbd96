#include "lib/convert/derivations.h"

#include "lib/convert/derivation_registry.h"
#include "lib/core/error.h"
#include "packers/registry.h"

namespace moepack::convert {

std::shared_ptr<const ExpertDerivation> make_expert_derivation(const std::string& role, const std::string& layout_id,
                                                               const std::set<std::string>& available, const ckpt::MoeLayer& layer) {
  const ComputationRow* row = find_computation(ComputationKind::derivation, layout_id);
  return row ? row->derive({role, layout_id, available, layer}) : nullptr;
}

DerivedLayout derived_layout(const std::string& layout_id) {
  const ComputationRow* row = find_computation(ComputationKind::derivation, layout_id);
  return row ? row->read_back(layout_id) : DerivedLayout{};
}

void produce_derived_expert(const ckpt::Checkpoint& checkpoint, const ckpt::MoeLayer& layer, const ExpertDerivation& derivation, const RankGeometry& g,
                            uint64_t expert, std::span<uint8_t> out) {
  std::vector<OwnedTensor> inputs;
  for (const std::string& input : derivation.inputs()) {
    ckpt::ExpertParams params = ckpt::read_expert_params(checkpoint, layer, expert, input);
    auto it = params.tensors.find(input);
    if (it == params.tensors.end()) throw_internal("expert " + std::to_string(expert) + " of " + layer.prefix + " has no " + input);
    inputs.push_back(load_expert_param(input, it->second, g));
  }
  derivation.produce(inputs, g, out, "layer " + layer.prefix + " expert " + std::to_string(expert));
}

PackedTensorPlan derived_tensor(const ckpt::Checkpoint& checkpoint, const ckpt::MoeLayer& layer, const std::string& role,
                                std::shared_ptr<const ExpertDerivation> derivation, const RankGeometry& g, uint64_t first_expert,
                                uint64_t local_experts) {
  // Shapes from one expert's summary (zeros), loaded as vLLM would.
  std::vector<OwnedTensor> probes;
  for (const std::string& input : derivation->inputs()) {
    const ckpt::ParamSummary* summary = nullptr;
    for (const auto& p : layer.params)
      if (p.name == input) summary = &p;
    if (!summary) throw_internal("derived " + role + ": " + layer.prefix + " has no " + input);
    probes.push_back(load_expert_param(input, OwnedTensor(summary->dtype, summary->shape), g));
  }
  PackedTensorPlan t;
  t.role = role;
  t.name = layer.prefix + "." + role;
  t.dtype = derivation->dtype();
  const std::vector<uint64_t> slab = derivation->slab_shape(probes, g);
  t.shape = slab;
  t.shape.insert(t.shape.begin(), local_experts);
  if (auto whole = derivation->parameter_shape(local_experts, probes, g)) t.shape = *whole;
  t.layout = derivation->name();
  t.num_experts = local_experts;
  t.slab_bytes = byte_size(t.dtype, slab);
  t.canonical_dtype = probes.empty() ? t.dtype : probes[0].dtype;
  t.canonical_shape = probes.empty() ? slab : probes[0].shape;
  if (auto u = derivation->unpacked(probes, g)) {
    t.canonical_dtype = u->dtype;
    t.canonical_shape = u->shape;
  }
  t.value_stage = derivation->reference_stage(g);
  const ckpt::Checkpoint* ck = &checkpoint;
  const ckpt::MoeLayer* lay = &layer;
  t.produce = [ck, lay, derivation, g, first_expert](uint64_t e, std::span<uint8_t> out) {
    produce_derived_expert(*ck, *lay, *derivation, g, first_expert + e, out);
  };
  return t;
}

}  // namespace moepack::convert
