// A family as data (internal to lib/oracle). Each family_*.cpp states, as rows, what one vLLM
// oracle module and the MoE methods around it decide:
//
//   MethodRow    which quantization methods reach which MoE method class, and what that class
//                adds around selection (size round-up, the keys it builds, its own refusals)
//   BackendRow   the members of the family's backend enum, with their experts classes in try
//                order and the member an explicit --moe-backend gets under the batched format
//   Selector     one select_*_moe_backend function: the --moe-backend map, the auto priority
//                (a list per platform plus reorderings), environment switches and filters
//   LayoutRow    the layout each tensor role gets after the backend's weight conversion
//
// and select_backend() below is the one walk over a Selector: an explicit --moe-backend
// (forced), else the priority list (auto), else vLLM's error. The shape follows oneDNN's
// ordered implementation lists (oneDNN src/cpu/cpu_inner_product_list.cpp: one list per key,
// walked in order) and ggml's type-trait rows (ggml src/ggml.c, type_traits): adding a backend
// or a method is adding rows; hooks (function pointers) exist only where vLLM's code is not a
// table, and each family file keeps them next to its rows.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "lib/oracle/selection.h"

namespace moepack::oracle {

// ---- Backends --------------------------------------------------------------------------------

// One member of a family's backend enum.
struct BackendRow {
  std::string name;                   // enum member, e.g. "FLASHINFER_TRTLLM"
  std::vector<std::string> classes;   // experts class ids, in vLLM's try order (Monolithic first)
  std::string value = {};             // the enum value vLLM prints, where it is not the member name
  // The member an explicit --moe-backend naming this one gets under the batched activation
  // format ("" = the same one).
  std::string batched = {};
  // The activation key this backend variant runs with (MXFP4's _backend_activation_key);
  // consulted only by selectors with activation variants.
  OptKey activation = std::nullopt;
  // Runs whatever activation key was requested instead of its own (MXFP4 EMULATION).
  bool takes_requested_activation = false;
  // An exported variable that makes the backend run 16-bit activations (b12x's _use_a16).
  std::string a16_env = {};
  // Never in an auto priority list: `targets` marks it "explicit only".
  bool explicit_only = false;
  // A --moe-backend spelling `targets` adds for it (a member reached only as a batched alias).
  std::string extra_moe_backend_name = {};

  const std::string& shown_value() const { return value.empty() ? name : value; }
};

// One entry of a family's map_*_backend: a --moe-backend string and the members it names, in
// the order they are tried (MXFP4 vendors name every activation variant).
struct MoeBackendName {
  std::string name;
  std::vector<std::string> backends;
};

// Tries `row`'s classes in order, recording each attempt as a Candidate. Returns the first
// passing class id; `last_reason` receives the last rejection reason.
std::optional<std::string> try_backend(SelectionContext& ctx, const BackendRow& row, const OptKey& w, const OptKey& a,
                                       ActivationFormat format, std::string& last_reason);

// Records a backend rejected before any class was checked.
void record_rejection(SelectionContext& ctx, const std::string& backend, const std::string& reason);

// ---- Selectors -------------------------------------------------------------------------------

// What one selector call is asked: the keys the method passes and the activation format.
struct Request {
  OptKey weight_key;
  OptKey activation_key;
  ActivationFormat format = ActivationFormat::Standard;
  // The activation key the model itself declared, before quantization_config.moe.activation
  // (MXFP4 quotes it in its final error).
  OptKey declared_activation_key;
};

using Condition = bool (*)(const SelectionContext&, const Request&);

// The auto list: the first `lists` entry whose condition holds (nullptr: always), then every
// move whose condition holds, in order. No lists: the family's backend rows in table order.
struct PriorityList {
  Condition when;
  std::vector<std::string> backends;
};
struct PriorityMove {
  Condition when;
  std::string backend;
  enum class To { front, back } to;
};

// Exported variables that force one backend (returned or raised as if requested) or take it and
// its batched twin out of the auto list (vLLM's envs.is_set blocks in the oracles).
struct EnvSwitch {
  std::vector<std::string> variables;      // the switch exists when any of them is exported
  bool (*forces)(const SelectionContext&);  // true: force `backend`; false: remove it
  std::string backend;                      // the standard-format member
  std::string note;                         // told when it forces
};

// A rule that keeps a backend out.
struct BackendFilter {
  // Why `backend` is out; nullopt when the rule lets it through.
  std::optional<std::string> (*rejects)(const SelectionContext&, const std::string& backend);
  // Whether the auto walk shows the rejected backend as a candidate (vLLM filters its list
  // before the walk; `plan` still explains why the backend never ran).
  bool shown = false;
  // vLLM's ValueError text for an explicit --moe-backend the rule rejects; nullptr: the
  // rejection is recorded and refused like any failing requested backend.
  std::string (*forced_message)(const SelectionContext&, const std::string& backend) = nullptr;
};

// What the auto walk tried: the list it walked and each class rejection as (value, reason).
struct AutoWalk {
  std::vector<std::string> backends;
  std::vector<std::pair<std::string, std::string>> rejections;
};

// One vLLM select_*_moe_backend.
struct Selector {
  std::span<const BackendRow> backends = {};
  std::span<const MoeBackendName> moe_backend_map = {};
  // How the family names itself in "moe_backend='x' is not supported for <map_name> MoE" and
  // "Unknown <map_name> MoE backend".
  std::string map_name = {};
  // A --moe-backend value this selector does not read (treated as auto), with what `plan` says.
  bool (*ignores_moe_backend)(const std::string& runner) = nullptr;
  std::string ignored_note = {};
  std::vector<PriorityList> priority = {};
  std::vector<PriorityMove> moves = {};
  std::vector<EnvSwitch> env_switches = {};
  std::vector<BackendFilter> filters = {};
  // Narrows the backends a --moe-backend string (or "auto") names to those the request can run
  // (MXFP4's activation variants); nullptr keeps them all.
  std::vector<std::string> (*narrow)(const SelectionContext&, const Request&, const std::string& runner,
                                     std::vector<std::string> backends) = nullptr;
  // Backends run their own activation variant (BackendRow::activation) instead of the requested key.
  bool activation_variants = false;
  // The ValueError text when a requested backend's classes all fail (`reason`: the last one's).
  std::string (*forced_refusal)(const std::string& value, const std::string& reason) = nullptr;
  // The auto walk found nothing: vLLM's exception, or a platform fallback.
  Selection (*none_fit)(SelectionContext&, const Request&, const AutoWalk&) = nullptr;
};

// The walk: an explicit --moe-backend (every named backend in order, raising the last refusal),
// else the environment switches, else the priority list with its filters, else none_fit.
Selection select_backend(const Selector& selector, SelectionContext& ctx, const Request& request);

// One backend as an explicit request: its filters, then its classes in order; vLLM's ValueError
// when none fits.
Selection return_or_raise(const Selector& selector, SelectionContext& ctx, const Request& request, const std::string& backend);

const BackendRow& backend_row(const Selector& selector, const std::string& name);

// ---- Methods ---------------------------------------------------------------------------------

// A quantization method (QuantizationConfig.get_name()) whose MoE layers get a method class,
// optionally only for one config.json model_type ("*" matches every method).
struct MethodRoute {
  std::string quant_method;
  std::string model_type = {};
};

using SizeRule = std::pair<int, int> (*)(const SelectionContext&, const Selection&, int hidden, int intermediate);

// One vLLM MoE method class of the family.
struct MethodRow {
  // "" for the row that serves a class name the family does not list (given by hand).
  std::string method_class;
  std::vector<MethodRoute> reached_by = {};
  // How the method picks its backend (most call the family's selector with their keys).
  Selection (*select)(SelectionContext&) = nullptr;
  // maybe_roundup_sizes beyond the all2all hidden round-up every method inherits; nullptr: none.
  SizeRule round_up = nullptr;
  // The keys the method builds for itself when the layer names none (online quantization).
  std::string own_weight_key = {};
  std::string own_activation_key = {};
  // Refusals of the method itself: before selection (deployment), after it (the backend), and
  // after the sizes are padded.
  void (*check_deployment)(const MoeLayerQuery&, const Deployment&) = nullptr;
  void (*check_selection)(const Selection&) = nullptr;
  void (*check_sizes)(int hidden, int intermediate, int padded_hidden, int padded_intermediate) = nullptr;
  // The ValueErrors of the method's create_weights on the per-partition sizes, which vLLM raises
  // after the backend is chosen and before any weight is loaded (so `plan` reports them too).
  void (*check_weights)(const SelectionContext&, const Selection&) = nullptr;
};

// vLLM's config picks another method on some deployments (CompressedTensorsMoEMethod.get_moe_method).
struct MethodSwitch {
  bool (*applies)(const MoeLayerQuery&, const Deployment&);
  Family family;
  std::string method_class;
  bool clears_weight_key;
  std::string note;
};

// ---- Layouts ---------------------------------------------------------------------------------

// The layout names of one backend's converted tensors, under a condition.
struct LayoutRow {
  std::string backend;  // enum member; "*" any, "X*" prefix, "*X" suffix
  std::string condition_text = {};
  bool (*condition)(const SelectionContext&, const Selection&) = nullptr;  // nullptr: always
  std::vector<std::pair<std::string, std::string>> roles = {};
  // When set, the roles of a matching row are computed from the layer instead (and taken as
  // they come: no role_present filter); `roles` then only describes the row for listings.
  std::vector<std::pair<std::string, std::string>> (*roles_of)(const SelectionContext&, const Selection&) = nullptr;
};

// ---- The family ------------------------------------------------------------------------------

struct FamilyDescriptor {
  Family family;
  std::string name;  // --family, `targets`, plan JSON
  std::vector<MethodRow> methods = {};
  std::vector<MethodSwitch> method_switches = {};
  // Fills what the family's methods compute for themselves from the layer's facts before
  // anything is selected (the WNA16 weight key); may raise.
  void (*complete_query)(MoeLayerQuery&) = nullptr;
  // Listing for `targets`: the enum and its --moe-backend map.
  std::span<const BackendRow> backends = {};
  std::span<const MoeBackendName> moe_backend_map = {};
  std::vector<BackendListing> extra_listings = {};  // backends reached outside the oracle
  // Zero padding the weight conversion adds (sizes_layouts.h, step 2); nullptr: none.
  SizeRule conversion_padding = nullptr;
  std::span<const LayoutRow> layouts = {};
};

// Every family, in the order `targets` lists them.
std::span<const FamilyDescriptor* const> family_descriptors();
const FamilyDescriptor& family_descriptor(Family family);

// The family's row for a method class; the catch-all row ("") for a class it does not list.
const MethodRow& method_row(const FamilyDescriptor& family, const std::string& method_class);

// The class vLLM gives a (quant method, model type) in this family; empty when none.
std::string resolve_method_class(const FamilyDescriptor& family, const std::string& quant_method, const std::string& model_type);

// How `targets` lists the family's backend rows.
std::vector<BackendListing> backend_listing(const FamilyDescriptor& family);

// ---- Shared by the family files --------------------------------------------------------------

int round_up_to(int x, int multiple);
// marlin_moe_padded_intermediate (quantization/utils/marlin_utils.py): the Marlin MoE thread
// tiles need intermediate % 64 == 0; the pad keeps a whole number of groups.
int marlin_moe_padded_intermediate(int intermediate, int group_size);
// A query key by constant name; nullopt for "".
OptKey key_named(const std::string& name);
// VLLM_ROCM_USE_AITER / VLLM_ROCM_USE_AITER_MOE, once exported: the FP8 and unquantized oracles
// force AITER when both are true (and AITER is not the RDNA4 build), else take it out.
bool aiter_moe_forced(const SelectionContext& ctx);

}  // namespace moepack::oracle
