#include "lib/oracle/selection.h"

namespace moepack::oracle {

void raise_value_error(const std::string& message) { throw OracleRaise("ValueError", message); }
void raise_not_implemented(const std::string& message) { throw OracleRaise("NotImplementedError", message); }

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

const BackendRow& find_backend_row(const std::vector<BackendRow>& rows, const std::string& name, const std::string& family) {
  for (const auto& b : rows)
    if (b.name == name) return b;
  throw OracleRaise("ValueError", "Unknown " + family + " MoE backend: " + name);
}

std::string map_moe_backend(const std::vector<std::pair<std::string, std::string>>& map, const std::string& runner, const std::string& family) {
  std::vector<std::string> names;
  for (const auto& [k, v] : map) {
    if (k == runner) return v;
    names.push_back(k);
  }
  raise_value_error("moe_backend='" + runner + "' is not supported for " + family + " MoE. Expected one of " + py_list(names) + ".");
}

std::string py_list(const std::vector<std::string>& items) {
  std::string s = "[";
  for (size_t i = 0; i < items.size(); ++i) s += (i ? ", '" : "'") + items[i] + "'";
  return s + "]";
}

std::string unsupported_message(const std::string& prefix, const std::string& value, const std::string& reason,
                                bool quote_with_reason) {
  if (!reason.empty()) {
    const std::string shown = quote_with_reason ? "'" + value + "'" : value;
    return prefix + " MoE backend " + shown + " does not support the deployment configuration since " + reason + ".";
  }
  return prefix + " MoE backend '" + value + "' does not support the deployment configuration.";
}

BackendListing listing_of(const std::string& family, const BackendRow& row,
                          const std::vector<std::pair<std::string, std::string>>& moe_backend_map) {
  BackendListing l;
  l.family = family;
  l.backend = row.name;
  for (const auto& c : row.classes) l.classes.push_back(experts_class_display_name(c));
  for (const auto& [name, member] : moe_backend_map)
    if (member == row.name) l.moe_backend_names.push_back(name);
  return l;
}

}  // namespace moepack::oracle
