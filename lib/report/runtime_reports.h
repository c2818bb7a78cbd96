// The documents the commands that run the runtime experts print with --json (shapes in
// moepack-verify(1), moepack-run(1) and moepack-bench(1)).
#pragma once

#include <nlohmann/json.hpp>

#include "lib/runtime/bench_experts.h"
#include "lib/runtime/run_layer.h"
#include "lib/runtime/verify.h"

namespace moepack::report {

// `verify --json`: integrity, every layer's comparison, golden-file problems.
nlohmann::ordered_json verify_json(const runtime::VerifyReport& report);

// `run --json`: what ran (layer, routing, sizes) and the output's summary.
nlohmann::ordered_json run_json(const runtime::RunReport& report, const runtime::RunOptions& options);

// `bench experts --json`: this machine's measured limits, the layer, and each token count's timing.
nlohmann::ordered_json bench_json(const runtime::BenchReport& report);

}  // namespace moepack::report
