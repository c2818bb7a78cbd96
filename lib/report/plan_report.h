// The document `moepack plan --json` prints (its shape is in moepack-plan(1)): the oracle's
// decision per MoE layer with the known kernel defects it hits, under the deployment's
// `target` object.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/oracle/deployment.h"
#include "lib/oracle/oracle.h"

namespace moepack::report {

// One entry of "layers": backend, experts class, sizes, layouts, every candidate tried, the
// error vLLM would raise, and the hazards (lib/oracle/hazards) on this deployment.
nlohmann::ordered_json plan_layer_json(const oracle::Decision& decision, const oracle::Deployment& deployment);

// The whole document. `reader_notes` are the checkpoint reader's notes (a "notes" key only
// when there are some).
nlohmann::ordered_json plan_json(const oracle::Deployment& deployment, const std::vector<oracle::Decision>& decisions,
                                 const std::vector<std::string>& reader_notes);

}  // namespace moepack::report
