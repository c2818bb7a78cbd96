// The document `moepack plan CKPT --target A,B,...` (or `--target all`) prints: one checkpoint
// planned for several devices with the same deployment flags. For people, one table: devices
// down, groups of MoE layers across (layers whose decisions agree on every device share a
// column), each cell the backend and experts class or `refused` with a numbered note giving
// vLLM's exception, and a hazards column naming the known kernel defects a device's decisions
// hit. For scripts, every device's full `plan --json` document and the grouping.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/oracle/deployment.h"
#include "lib/oracle/oracle.h"

namespace moepack::report {

// One device's answer: its deployment and the decision per MoE layer, layers in the same order
// for every device.
struct TargetPlan {
  oracle::Deployment deployment;
  std::vector<oracle::Decision> decisions;
};

// Layers (indexes into each TargetPlan's decisions) whose decisions agree on every device, in
// the order of their first layer.
std::vector<std::vector<size_t>> fleet_layer_groups(const std::vector<TargetPlan>& plans);

// The table, as printed (ends with a newline).
std::string fleet_table_text(const std::vector<TargetPlan>& plans);

// {"reference", "targets": [names], "layer_groups": [{"layers": [prefixes]}],
//  "plans": [plan_json of each device], "notes" (the reader's, when any)}.
nlohmann::ordered_json fleet_json(const std::vector<TargetPlan>& plans, const std::vector<std::string>& reader_notes);

// Whether some device runs every layer (plan's exit status is 3 when none does).
bool fleet_has_a_device_for_every_layer(const std::vector<TargetPlan>& plans);

}  // namespace moepack::report
