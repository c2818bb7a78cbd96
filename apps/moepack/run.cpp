// `moepack run ARTIFACT --input X.safetensors -o Y.safetensors [--layer PREFIX] [--json]`
// (docs/CLI.md): one MoE layer of the artifact on the caller's hidden states, routed by the given
// router logits or by given top-k ids and weights (lib/convert/run_layer). Parsing and printing only; the --json document is lib/report's.
#include <cstdio>
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "apps/moepack/command.h"
#include "lib/runtime/run_layer.h"
#include "lib/core/json_output.h"
#include "lib/report/runtime_reports.h"

namespace moepack::cli {
namespace {

struct RunCliOptions {
  runtime::RunOptions run;
  std::string layer;
  bool json = false;
};

int run_run(RunCliOptions& o) {
  if (!o.layer.empty()) o.run.layer = o.layer;
  const runtime::RunReport r = runtime::run_layer(o.run);
  if (o.json) {
    std::cout << safe_json_text(report::run_json(r, o.run)) << std::endl;
  } else {
    std::printf("%s (%s, %s%s)\n", r.layer.c_str(), r.family.c_str(), r.backend.c_str(), r.ranks > 1 ? (", " + std::to_string(r.ranks) + " ranks").c_str() : "");
    std::printf("  %llu tokens x %llu (%s), %s, %llu experts per token of %llu\n", static_cast<unsigned long long>(r.tokens),
                static_cast<unsigned long long>(r.hidden_size), r.hidden_dtype.c_str(),
                r.routing == "router_logits" ? ("routed by " + r.routing_method).c_str() : "routing given by topk_ids",
                static_cast<unsigned long long>(r.top_k), static_cast<unsigned long long>(r.num_experts));
    std::printf("  wrote %s: output [%llu, %llu] F32, max |output| %.6g\n", o.run.output.c_str(), static_cast<unsigned long long>(r.tokens),
                static_cast<unsigned long long>(r.hidden_size), r.max_abs_output);
  }
  if (r.nonfinite_outputs)
    std::fprintf(stderr, "moepack: warning: %llu output values are not finite\n", static_cast<unsigned long long>(r.nonfinite_outputs));
  return 0;
}

CommandRegistration reg(50, [](CLI::App& app) {
  auto opts = std::make_shared<RunCliOptions>();
  auto* sub = app.add_subcommand("run", "Run one MoE layer of an artifact on given hidden states and router logits (or top-k ids)");
  sub->add_option("ARTIFACT", opts->run.artifact, "Artifact directory written by convert")->required();
  sub->add_option("--input", opts->run.input, "safetensors file: hidden_states, and router_logits or topk_ids + topk_weights")->required();
  sub->add_option("-o,--output", opts->run.output, "safetensors file to write: output, topk_ids, topk_weights")->required();
  sub->add_option("--layer", opts->layer, "Prefix of the MoE layer to run (required when the artifact has several)");
  sub->add_flag("--json", opts->json, "Print a JSON summary (shape in moepack-run(1))");
  sub->callback([opts] {
    global_flags().json = opts->json;
    set_exit_code(run_run(*opts));
  });
});

}  // namespace
}  // namespace moepack::cli
