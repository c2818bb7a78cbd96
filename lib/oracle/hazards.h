// Known kernel defects: deployments the oracle picks exactly as vLLM does, but whose kernel is
// known to compute something wrong there. vLLM runs them anyway, so moepack cannot refuse (the
// decision is vLLM's); `plan` lists the hazards a layer hits, `convert` warns and converts.
//
// One table, one row per defect: an id that names the kernel, version, device and defect; the
// condition (a predicate over the layer's decision and the deployment); what goes wrong; and
// where and when it was seen, so a reader can judge the evidence and retire the row when the
// kernel is fixed.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lib/oracle/deployment.h"
#include "lib/oracle/oracle.h"

namespace moepack::oracle {

// A defect one layer of one deployment hits (plan --json: layers[*].hazards[*]).
struct Hazard {
  std::string id;      // "triton_kernels-3.5.1-sm90-partial-k-tile"
  std::string effect;  // what goes wrong, for this layer's sizes
  std::string seen;    // where and when the defect was observed
};

struct HazardRow {
  std::string id;
  // Whether the layer runs the defective kernel in the defective case. Refused decisions never
  // match (they run no kernel).
  std::function<bool(const Decision&, const Deployment&)> applies;
  // The effect, stated with the layer's own sizes.
  std::function<std::string(const Decision&)> effect;
  std::string seen;
};

// Every known hazard, in the order they are reported.
const std::vector<HazardRow>& hazard_table();

// The hazards a decided layer hits on this deployment; empty for most layers.
std::vector<Hazard> find_hazards(const Decision& decision, const Deployment& deployment);

}  // namespace moepack::oracle
