#include "lib/report/fleet_report.h"

#include <algorithm>
#include <map>

#include "lib/core/error.h"
#include "lib/core/json_output.h"
#include "lib/oracle/hazards.h"
#include "lib/report/plan_report.h"

namespace moepack::report {
namespace {

using json = nlohmann::ordered_json;

void check_aligned(const std::vector<TargetPlan>& plans) {
  for (const auto& p : plans) {
    if (p.decisions.size() != plans.front().decisions.size()) throw_internal("fleet plan: devices disagree on the number of MoE layers");
    for (size_t i = 0; i < p.decisions.size(); ++i)
      if (p.decisions[i].prefix != plans.front().decisions[i].prefix) throw_internal("fleet plan: devices disagree on the order of MoE layers");
  }
}

// What a layer's decision is on one device, prefix aside: two layers with the same text are
// decided alike there.
std::string decision_text(const oracle::Decision& d, const oracle::Deployment& dep) {
  json j = plan_layer_json(d, dep);
  j.erase("prefix");
  return safe_json_text(j, -1);
}

// A column's heading: the layer, a run of layers as "N layers FIRST .. LAST", and layers apart
// (decided alike, with others between) by name, or as "N layers FIRST, ..., LAST (not adjacent)".
std::string group_label(const std::vector<size_t>& layers, const TargetPlan& plan) {
  auto prefix = [&](size_t layer) { return plan.decisions[layer].prefix; };
  if (layers.size() == 1) return prefix(layers.front());
  const bool adjacent = layers.back() - layers.front() + 1 == layers.size();
  const std::string count = std::to_string(layers.size()) + " layers ";
  if (adjacent) return count + prefix(layers.front()) + " .. " + prefix(layers.back());
  if (layers.size() > 3) return count + prefix(layers.front()) + ", ..., " + prefix(layers.back()) + " (not adjacent)";
  std::string names;
  for (size_t layer : layers) names += (names.empty() ? "" : ", ") + prefix(layer);
  return names;
}

std::string pad(const std::string& text, size_t width) { return text + std::string(width > text.size() ? width - text.size() : 0, ' '); }

}  // namespace

std::vector<std::vector<size_t>> fleet_layer_groups(const std::vector<TargetPlan>& plans) {
  std::vector<std::vector<size_t>> groups;
  if (plans.empty()) return groups;
  check_aligned(plans);
  std::map<std::string, size_t> group_of;  // the layer's decisions on every device -> group
  for (size_t layer = 0; layer < plans.front().decisions.size(); ++layer) {
    std::string key;
    for (const auto& p : plans) key += decision_text(p.decisions[layer], p.deployment) + "\n";
    auto [it, fresh] = group_of.emplace(key, groups.size());
    if (fresh) groups.emplace_back();
    groups[it->second].push_back(layer);
  }
  return groups;
}

std::string fleet_table_text(const std::vector<TargetPlan>& plans) {
  if (plans.empty()) return "";
  const auto groups = fleet_layer_groups(plans);
  const oracle::Deployment& first = plans.front().deployment;
  std::string out = "reference: " + oracle::oracle_reference() + "\n";
  out += "deployment: tp " + std::to_string(first.parallel.tp) + ", dp " + std::to_string(first.parallel.dp) +
         (first.parallel.enable_expert_parallel ? ", ep" : "") + ", moe-backend " + first.moe_backend + "\n";
  if (groups.empty()) return out + "\nno MoE layers\n";

  // Cells first, then the widths they need. A refusal's exception is numbered once and given
  // in full under the table.
  std::vector<std::string> refusals;
  std::vector<std::vector<std::string>> rows;  // target, one cell per group, hazards
  for (const auto& p : plans) {
    std::vector<std::string> row = {p.deployment.device.target_name};
    for (const auto& group : groups) {
      const oracle::Decision& d = p.decisions[group.front()];
      if (d.error) {
        const std::string reason = d.error->type + ": " + d.error->message;
        auto it = std::find(refusals.begin(), refusals.end(), reason);
        if (it == refusals.end()) it = refusals.insert(refusals.end(), reason);
        row.push_back("refused [" + std::to_string(it - refusals.begin() + 1) + "]");
      } else {
        row.push_back(d.backend.value_or("-") + " / " + d.experts_class.value_or("-"));
      }
    }
    std::vector<std::string> hazards;
    for (const auto& d : p.decisions)
      for (const auto& h : oracle::find_hazards(d, p.deployment))
        if (std::find(hazards.begin(), hazards.end(), h.id) == hazards.end()) hazards.push_back(h.id);
    std::string hazard_cell;
    for (const auto& id : hazards) hazard_cell += (hazard_cell.empty() ? "" : ", ") + id;
    row.push_back(hazard_cell.empty() ? "-" : hazard_cell);
    rows.push_back(std::move(row));
  }
  std::vector<std::string> header = {"target"};
  for (const auto& group : groups) header.push_back(group_label(group, plans.front()));
  header.push_back("hazards");
  std::vector<size_t> width(header.size(), 0);
  for (size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t c = 0; c < cells.size(); ++c) text += c + 1 == cells.size() ? cells[c] : pad(cells[c], width[c]) + "  ";
    return text + "\n";
  };
  out += "\n" + line(header);
  for (const auto& row : rows) out += line(row);
  if (!refusals.empty()) out += "\n";
  for (size_t i = 0; i < refusals.size(); ++i) out += "[" + std::to_string(i + 1) + "] " + refusals[i] + "\n";
  return out;
}

json fleet_json(const std::vector<TargetPlan>& plans, const std::vector<std::string>& reader_notes) {
  json targets = json::array(), layer_groups = json::array(), documents = json::array();
  for (const auto& p : plans) {
    targets.push_back(p.deployment.device.target_name);
    documents.push_back(plan_json(p.deployment, p.decisions, {}));
  }
  for (const auto& group : fleet_layer_groups(plans)) {
    json prefixes = json::array();
    for (size_t layer : group) prefixes.push_back(plans.front().decisions[layer].prefix);
    layer_groups.push_back({{"layers", prefixes}});
  }
  json out = {{"reference", oracle::oracle_reference()}, {"targets", targets}, {"layer_groups", layer_groups}, {"plans", documents}};
  if (!reader_notes.empty()) out["notes"] = reader_notes;
  return out;
}

bool fleet_has_a_device_for_every_layer(const std::vector<TargetPlan>& plans) {
  return std::any_of(plans.begin(), plans.end(), [](const TargetPlan& p) {
    return std::all_of(p.decisions.begin(), p.decisions.end(), [](const oracle::Decision& d) { return d.ok(); });
  });
}

}  // namespace moepack::report
