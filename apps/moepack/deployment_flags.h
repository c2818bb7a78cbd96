// The deployment flags of docs/CLI.md ("Describing a deployment"), shared by plan, convert and
// verify: one place declares them on a CLI::App and turns the parsed values into an
// oracle::Deployment.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "lib/oracle/deployment.h"

namespace moepack::cli {

struct DeploymentOptions {
  std::string target;
  int tp = 1;
  int tp_rank = -1;  // convert only: -1 = every rank
  int dp = 1;
  bool ep = false;
  bool eplb = false;  // --enable-eplb
  std::string all2all = "allgather_reducescatter";
  std::string moe_backend = "auto";
  std::string activation;    // --activation (quantization_config.moe.activation), "" = none
  bool lora = false;
  std::string quantization;  // --quantization, "" = from the checkpoint
  std::string dtype = "bf16";
  std::vector<std::string> env;  // NAME=VALUE
  std::vector<std::string> with_packages;
  std::vector<std::string> without_packages;
};

// Declares --target (required), --tp, --dp, --ep, --enable-eplb, --all2all, --moe-backend, --activation,
// --lora, --quantization, --dtype, --env, --with, --without; and --tp-rank when asked.
void add_deployment_flags(CLI::App& app, DeploymentOptions& options, bool with_tp_rank);

// Whether --target names several devices: `all`, or a comma list (plan, convert).
bool names_several_targets(const std::string& target);
// The devices of such a --target: `all` is every device this build knows except `host` (this
// machine, which a fleet's answer must not depend on); a list is taken in its order. Throws
// Error(usage) for an empty or repeated name (unknown names fail in build_deployment).
std::vector<std::string> target_names(const std::string& target);

// Builds the oracle's view. Throws moepack::Error(usage) for values no deployment can have
// (unknown target or package, malformed --env, sizes below 1, unknown dtype).
oracle::Deployment build_deployment(const DeploymentOptions& options);

}  // namespace moepack::cli
