#include "lib/oracle/family.h"

#include <algorithm>
#include <numeric>

namespace moepack::oracle {

// The descriptors live in their family files.
const FamilyDescriptor& mxfp4_family();
const FamilyDescriptor& nvfp4_family();
const FamilyDescriptor& fp8_family();
const FamilyDescriptor& mxfp8_family();
const FamilyDescriptor& wna16_family();
const FamilyDescriptor& int8_family();
const FamilyDescriptor& w4a8_family();
const FamilyDescriptor& w4a8_int8_family();
const FamilyDescriptor& unquantized_family();

std::span<const FamilyDescriptor* const> family_descriptors() {
  static const FamilyDescriptor* const all[] = {&mxfp4_family(), &nvfp4_family(), &fp8_family(),
                                                &mxfp8_family(), &wna16_family(), &int8_family(),
                                                &w4a8_family(),  &w4a8_int8_family(), &unquantized_family()};
  return all;
}

const FamilyDescriptor& family_descriptor(Family family) {
  for (const FamilyDescriptor* d : family_descriptors())
    if (d->family == family) return *d;
  return unquantized_family();
}

const MethodRow& method_row(const FamilyDescriptor& family, const std::string& method_class) {
  const MethodRow* catch_all = nullptr;
  for (const MethodRow& m : family.methods) {
    if (m.method_class == method_class) return m;
    if (m.method_class.empty()) catch_all = &m;
  }
  return *catch_all;  // every family has one (family files end their method rows with it)
}

std::string resolve_method_class(const FamilyDescriptor& family, const std::string& quant_method, const std::string& model_type) {
  for (const MethodRow& m : family.methods)
    for (const MethodRoute& r : m.reached_by)
      if ((r.quant_method == "*" || r.quant_method == quant_method) && (r.model_type.empty() || r.model_type == model_type))
        return m.method_class;
  return "";
}

std::vector<BackendListing> backend_listing(const FamilyDescriptor& family) {
  std::vector<BackendListing> out;
  for (const BackendRow& row : family.backends) {
    BackendListing l;
    l.family = family.name;
    l.backend = row.name;
    for (const auto& c : row.classes) l.classes.push_back(experts_class_display_name(c));
    for (const MoeBackendName& m : family.moe_backend_map)
      if (std::find(m.backends.begin(), m.backends.end(), row.name) != m.backends.end()) l.moe_backend_names.push_back(m.name);
    if (!row.extra_moe_backend_name.empty()) l.moe_backend_names.push_back(row.extra_moe_backend_name);
    l.auto_selectable = !row.explicit_only;
    out.push_back(std::move(l));
  }
  out.insert(out.end(), family.extra_listings.begin(), family.extra_listings.end());
  return out;
}

int round_up_to(int x, int multiple) { return (x + multiple - 1) / multiple * multiple; }

int marlin_moe_padded_intermediate(int intermediate, int group_size) {
  return round_up_to(intermediate, std::lcm(64, group_size > 0 ? group_size : 1));
}

OptKey key_named(const std::string& name) { return name.empty() ? OptKey{} : quant_key_by_name(name); }

bool aiter_moe_forced(const SelectionContext& ctx) {
  const EnvVars& env = ctx.deployment.env;
  return env.true_flag("VLLM_ROCM_USE_AITER", false) && env.true_flag("VLLM_ROCM_USE_AITER_MOE", true) && !ctx.env.aiter_rdna_enabled();
}

// ---------------------------------------------------------------------------------------------
// The walk
// ---------------------------------------------------------------------------------------------

std::optional<std::string> try_backend(SelectionContext& ctx, const BackendRow& row, const OptKey& w, const OptKey& a,
                                       ActivationFormat format, std::string& last_reason) {
  last_reason.clear();
  for (const auto& cls : row.classes) {
    CheckInput in{ctx.moe, w, a, format, ctx.env};
    CheckResult r = is_supported_config(cls, in);
    ctx.candidates.push_back({row.name, experts_class_display_name(cls), r.ok, r.reason});
    if (r.ok) return cls;
    last_reason = r.reason;
  }
  return std::nullopt;
}

void record_rejection(SelectionContext& ctx, const std::string& backend, const std::string& reason) {
  ctx.candidates.push_back({backend, "", false, reason});
}

const BackendRow& backend_row(const Selector& selector, const std::string& name) {
  for (const BackendRow& b : selector.backends)
    if (b.name == name) return b;
  // A name missing from the table is a bug in the selector that asked; vLLM's own text.
  raise_value_error("Unknown " + selector.map_name + " MoE backend: " + name);
}

namespace {

// map_*_backend: the members a --moe-backend string names; vLLM's ValueError for any other.
std::vector<std::string> mapped_backends(const Selector& selector, const std::string& runner) {
  std::vector<std::string> names;
  for (const MoeBackendName& m : selector.moe_backend_map) {
    if (m.name == runner) return m.backends;
    names.push_back(m.name);
  }
  raise_value_error("moe_backend='" + runner + "' is not supported for " + selector.map_name + " MoE. Expected one of " +
                    py_list(names) + ".");
}

const std::string& batched_alias(const Selector& selector, const std::string& name, ActivationFormat format) {
  if (format != ActivationFormat::BatchedExperts) return name;
  const BackendRow& row = backend_row(selector, name);
  return row.batched.empty() ? name : row.batched;
}

OptKey activation_for(const Selector& selector, const SelectionContext& ctx, const Request& request, const BackendRow& row) {
  if (selector.activation_variants) return row.takes_requested_activation ? request.activation_key : row.activation;
  if (!row.a16_env.empty() && ctx.deployment.env.int_flag(row.a16_env, false)) return std::nullopt;
  return request.activation_key;
}

std::optional<Selection> try_row(const Selector& selector, SelectionContext& ctx, const Request& request, const BackendRow& row,
                                 std::string& reason) {
  const OptKey a = activation_for(selector, ctx, request, row);
  if (auto cls = try_backend(ctx, row, request.weight_key, a, request.format, reason)) return Selection{row.name, *cls, request.weight_key, a};
  return std::nullopt;
}

Selection select_forced(const Selector& selector, SelectionContext& ctx, const Request& request, const std::string& runner) {
  std::vector<std::string> names = mapped_backends(selector, runner);
  if (selector.narrow) names = selector.narrow(ctx, request, runner, std::move(names));
  for (auto& n : names) n = batched_alias(selector, n, request.format);
  if (names.empty()) raise_value_error("moe_backend='" + runner + "' does not support activation=" + ctx.key_text(request.activation_key));
  // Every named variant is tried; the last refusal is the one raised.
  std::optional<OracleRaise> last;
  for (const auto& name : names) {
    try {
      return return_or_raise(selector, ctx, request, name);
    } catch (const OracleRaise& e) {
      last = e;
    }
  }
  throw *last;
}

std::vector<std::string> auto_priority(const Selector& selector, const SelectionContext& ctx, const Request& request) {
  std::vector<std::string> list;
  if (selector.priority.empty()) {
    for (const BackendRow& row : selector.backends) list.push_back(row.name);
  } else {
    for (const PriorityList& p : selector.priority)
      if (!p.when || p.when(ctx, request)) {
        list = p.backends;
        break;
      }
  }
  for (const PriorityMove& m : selector.moves) {
    if (!m.when(ctx, request)) continue;
    auto it = std::find(list.begin(), list.end(), m.backend);
    if (it == list.end()) continue;
    list.erase(it);
    if (m.to == PriorityMove::To::front) list.insert(list.begin(), m.backend);
    else list.push_back(m.backend);
  }
  return list;
}

void remove_backend(std::vector<std::string>& list, const std::string& name) {
  list.erase(std::remove(list.begin(), list.end(), name), list.end());
}

// The first filter that rejects `name`, as (filter, reason).
std::optional<std::pair<const BackendFilter*, std::string>> filtered_out(const Selector& selector, const SelectionContext& ctx,
                                                                         const std::string& name) {
  for (const BackendFilter& f : selector.filters)
    if (auto why = f.rejects(ctx, name)) return std::make_pair(&f, *why);
  return std::nullopt;
}

Selection select_auto(const Selector& selector, SelectionContext& ctx, const Request& request, const std::string& runner) {
  std::vector<std::string> list = auto_priority(selector, ctx, request);
  if (runner != "auto" && !selector.ignored_note.empty()) ctx.notes.push_back(selector.ignored_note);
  for (const EnvSwitch& s : selector.env_switches) {
    const bool exported = std::any_of(s.variables.begin(), s.variables.end(), [&](const std::string& v) { return ctx.deployment.env.is_set(v); });
    if (!exported) continue;
    if (s.forces(ctx)) {
      ctx.notes.push_back(s.note);
      return return_or_raise(selector, ctx, request, batched_alias(selector, s.backend, request.format));
    }
    remove_backend(list, s.backend);
    const BackendRow& row = backend_row(selector, s.backend);
    if (!row.batched.empty()) remove_backend(list, row.batched);
  }
  if (selector.narrow) list = selector.narrow(ctx, request, "auto", std::move(list));

  AutoWalk walk{list, {}};
  for (const auto& name : list) {
    if (auto out = filtered_out(selector, ctx, name)) {
      if (out->first->shown) record_rejection(ctx, name, out->second);
      continue;
    }
    const BackendRow& row = backend_row(selector, name);
    const size_t first = ctx.candidates.size();
    std::string reason;
    if (auto s = try_row(selector, ctx, request, row, reason)) return *s;
    for (size_t i = first; i < ctx.candidates.size(); ++i) walk.rejections.emplace_back(row.shown_value(), ctx.candidates[i].reason);
  }
  return selector.none_fit(ctx, request, walk);
}

}  // namespace

Selection return_or_raise(const Selector& selector, SelectionContext& ctx, const Request& request, const std::string& backend) {
  if (auto out = filtered_out(selector, ctx, backend)) {
    if (out->first->forced_message) raise_value_error(out->first->forced_message(ctx, backend));
    record_rejection(ctx, backend, out->second);
    raise_value_error(selector.forced_refusal(backend_row(selector, backend).shown_value(), out->second));
  }
  const BackendRow& row = backend_row(selector, backend);
  std::string reason;
  if (auto s = try_row(selector, ctx, request, row, reason)) return *s;
  raise_value_error(selector.forced_refusal(row.shown_value(), reason));
}

Selection select_backend(const Selector& selector, SelectionContext& ctx, const Request& request) {
  const std::string& runner = ctx.moe.moe_backend;
  const bool ignored = selector.ignores_moe_backend && selector.ignores_moe_backend(runner);
  if (runner != "auto" && !ignored) return select_forced(selector, ctx, request, runner);
  return select_auto(selector, ctx, request, runner);
}

}  // namespace moepack::oracle
