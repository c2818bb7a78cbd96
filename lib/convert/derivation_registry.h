// The registry of what a layout id can name besides a packer (packers/registry): per-expert
// derivations (an expert's output computed from several of its params, derivations.h), per-layer
// reductions (one tensor from all of a rank's experts, reductions.h) and value stages (a change
// of one param's values before its layout, reductions.h). One row per (kind, id head), the head
// being the id up to its first '(': the family file that defines it, its factory, and for
// derivations how the runtime reads the output back. A layout id is found by one lookup of its
// head, not by asking every family in turn.
//
// Adding a derivation, reduction or stage = its class in the family's file and one row in
// derivation_registry.cpp, with an example id. tests/convert/derivation_contract_test.cpp walks
// every row: the head is unique for its kind, the example resolves through the row to an object
// named exactly the example, and a derivation's read-back names a registered packer.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>

#include "formats/checkpoints/checkpoint.h"
#include "lib/convert/derivations.h"
#include "lib/convert/reductions.h"

namespace moepack::convert {

enum class ComputationKind { derivation, reduction, value_stage };

// What a derivation factory is given: the output role, its full layout id, the layer's canonical
// params and the layer.
struct DerivationQuery {
  const std::string& role;
  const std::string& layout_id;
  const std::set<std::string>& available;
  const ckpt::MoeLayer& layer;
};

struct ComputationRow {
  std::string_view head;        // the ids' common head (layout_id::head), e.g. vllm.fp8_marlin_scales
  ComputationKind kind;
  std::string_view defined_in;  // the family file, for the reader
  // The factory of the row's kind (the other two are null); each returns null for an id of this
  // head that names nothing (a malformed argument list).
  std::shared_ptr<const ExpertDerivation> (*derive)(const DerivationQuery&) = nullptr;
  const LayerReduction* (*reduce)(std::string_view id) = nullptr;
  const ValueStage* (*stage)(std::string_view id) = nullptr;
  // Derivations: what the output is to the runtime (DerivedKind) and the packer it went through last.
  DerivedLayout (*read_back)(const std::string& id) = nullptr;
  // Derivations whose output the runtime must undo or complete on an expert's canonical params
  // (keyed by role) before computing with them: the act-order gather, W4A8's FP8 scales as value
  // tables, the g_idx vLLM's CPU INT4 kernel never reads. Called with the output's role, once
  // per expert, in role order; null when the unpacked output is used as it is.
  void (*read_back_params)(const std::string& role, std::map<std::string, OwnedTensor>& params, const std::string& where) = nullptr;
  // One full id of the row, as the oracle writes it (the contract test resolves it).
  std::string (*example)();
  // Derivations: a shipped sample whose first MoE layer the example applies to, and the role.
  std::string_view example_sample;
  std::string_view example_role;
};

// Every row, in table order.
std::span<const ComputationRow> computation_table();

// The row of `kind` whose head is `id`'s, or nullptr.
const ComputationRow* find_computation(ComputationKind kind, std::string_view id);

}  // namespace moepack::convert
