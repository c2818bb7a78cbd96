#include "lib/report/plan_report.h"

#include "lib/convert/target.h"
#include "lib/oracle/hazards.h"

namespace moepack::report {

using json = nlohmann::ordered_json;

json plan_layer_json(const oracle::Decision& d, const oracle::Deployment& dep) {
  auto opt = [](const std::optional<std::string>& s) { return s ? json(*s) : json(nullptr); };
  json candidates = json::array();
  for (const auto& c : d.candidates)
    candidates.push_back({{"backend", c.backend}, {"experts_class", c.experts_class.empty() ? json(nullptr) : json(c.experts_class)},
                          {"ok", c.ok}, {"reason", c.reason.empty() ? json(nullptr) : json(c.reason)}});
  json layouts = json::object();
  for (const auto& [role, layout] : d.tensor_layouts) layouts[role] = layout;
  json hazards = json::array();
  for (const auto& h : oracle::find_hazards(d, dep)) hazards.push_back({{"id", h.id}, {"effect", h.effect}, {"seen", h.seen}});
  return {
      {"prefix", d.prefix},
      {"family", oracle::family_name(d.family)},
      {"quant_method", d.quant_method.empty() ? json(nullptr) : json(d.quant_method)},
      {"method_class", d.method_class},
      {"weight_key", opt(d.weight_key)},
      {"activation_key", opt(d.activation_key)},
      {"backend", opt(d.backend)},
      {"experts_class", opt(d.experts_class)},
      {"num_experts", d.num_experts},
      {"num_local_experts", d.num_local_experts},
      {"hidden_size", d.hidden_size},
      {"intermediate_size", d.intermediate_size},
      {"padded_hidden_size", d.padded_hidden_size},
      {"padded_intermediate_size", d.padded_intermediate_size},
      {"candidates", candidates},
      {"tensor_layouts", layouts},
      {"notes", d.notes},
      {"error", d.error ? json{{"type", d.error->type}, {"message", d.error->message}} : json(nullptr)},
      {"hazards", hazards},
  };
}

json plan_json(const oracle::Deployment& dep, const std::vector<oracle::Decision>& decisions, const std::vector<std::string>& reader_notes) {
  json layers = json::array();
  for (const auto& d : decisions) layers.push_back(plan_layer_json(d, dep));
  json out = {{"target", convert::target_json(dep)}, {"reference", oracle::oracle_reference()}, {"layers", layers}};
  if (!reader_notes.empty()) out["notes"] = reader_notes;
  return out;
}

}  // namespace moepack::report
