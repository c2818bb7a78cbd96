// `moepack convert CKPT --target D -o OUT`: plans (lib/convert/plan), checks values
// (lib/convert/bad_values), then streams the artifact through a staging directory
// (lib/convert/executor, staging). Parsing and printing only; the --dry-run --json document is
// lib/report's.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iomanip>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "apps/moepack/command.h"
#include "apps/moepack/deployment_flags.h"
#include "formats/checkpoints/checkpoint.h"
#include "formats/checkpoints/hub_cache.h"
#include "lib/convert/bad_values.h"
#include "lib/convert/executor.h"
#include "lib/convert/plan.h"
#include "lib/convert/staging.h"
#include "lib/convert/target.h"
#include "lib/core/cancel.h"
#include "lib/core/error.h"
#include "lib/core/json_output.h"
#include "lib/core/progress.h"
#include "lib/core/tensor.h"
#include "lib/oracle/hazards.h"
#include "lib/report/convert_report.h"

namespace moepack::cli {
namespace {

struct ConvertOptions {
  std::string checkpoint;
  std::string output;
  DeploymentOptions deployment;
  int threads = 0;
  bool dry_run = false;
  bool force = false;
  bool json = false;
  bool allow_bad_values = false;
  std::string max_shard_size = "5GB";
};

// "5GB" (10^9, as huggingface_hub counts), "2GiB", "500MB", "4096" (bytes).
uint64_t parse_size(const std::string& text) {
  size_t pos = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &pos);
  } catch (const std::exception&) {
    throw Error(ErrorKind::usage, "--max-shard-size: `" + text + "` is not a size (examples: 5GB, 500MB, 2GiB, 1048576)");
  }
  std::string unit = text.substr(pos);
  const std::pair<const char*, uint64_t> units[] = {{"", 1}, {"B", 1}, {"KB", 1000}, {"MB", 1000000}, {"GB", 1000000000},
                                                    {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}};
  for (const auto& [name, factor] : units)
    if (unit == name) {
      if (value == 0) throw Error(ErrorKind::usage, "--max-shard-size must be positive");
      return value * factor;
    }
  throw Error(ErrorKind::usage, "--max-shard-size: unknown unit `" + unit + "` (B, KB, MB, GB, KiB, MiB, GiB)");
}

void print_dry_run(const convert::ConversionPlan& plan, const std::vector<convert::ShardAssignment>& shards) {
  std::cout << "dry run: nothing is written\n";
  for (const auto& l : plan.layers) {
    std::cout << l.manifest.prefix << ": " << l.manifest.backend << " / " << l.manifest.experts_class << "  (hidden "
              << l.manifest.hidden_size << " -> " << l.manifest.padded_hidden_size << ", intermediate per rank "
              << l.manifest.intermediate_size << " -> " << l.manifest.padded_intermediate_size << ")\n";
    for (const auto& r : l.ranks)
      for (const auto& t : r.tensors)
        std::cout << "  " << (l.ranks.size() > 1 ? "rank " + std::to_string(r.rank) + " " : "") << t.role << "  "
                  << dtype_name(t.dtype) << shape_string(t.shape) << "  " << human_bytes(t.num_experts * t.slab_bytes) << "  "
                  << t.layout << "\n";
  }
  std::cout << "files:\n";
  for (const auto& s : shards)
    std::cout << "  " << s.file_name << "  " << s.tensor_names.size() << " tensors, " << human_bytes(s.data_bytes) << "\n";
  std::cout << "copied unchanged: " << plan.pass_through.size() << " non-expert tensors, " << plan.copied_files.size() << " other files\n";
}

// vLLM runs these layers, so convert converts them too; it says once per hazard which layers
// hit it (the layers of a real model all do alike).
void warn_of_hazards(const std::vector<convert::LayerDecision>& decisions, const oracle::Deployment& deployment) {
  std::vector<std::pair<oracle::Hazard, std::vector<std::string>>> hazards;  // hazard -> layer prefixes, in order
  for (const auto& layer : decisions)
    for (const auto& hazard : oracle::find_hazards(layer.decision, deployment)) {
      auto same = std::find_if(hazards.begin(), hazards.end(),
                               [&](const auto& h) { return h.first.id == hazard.id && h.first.effect == hazard.effect; });
      if (same == hazards.end()) hazards.push_back({hazard, {layer.decision.prefix}});
      else same->second.push_back(layer.decision.prefix);
    }
  for (const auto& [hazard, prefixes] : hazards) {
    const std::string where =
        prefixes.size() == 1 ? prefixes.front() : std::to_string(prefixes.size()) + " layers " + prefixes.front() + " .. " + prefixes.back();
    std::cerr << "moepack: warning: " << where << ": known kernel defect " << hazard.id << ": " << hazard.effect << " (seen: " << hazard.seen
              << ")\n";
  }
}

void run_convert(const ConvertOptions& o) {
  global_flags().json = o.json;
  if (names_several_targets(o.deployment.target))
    throw Error(ErrorKind::usage, "convert writes one target per run (--target `" + o.deployment.target +
                                      "` names several); run it once per device (plan takes a list or `all`)");
  oracle::Deployment deployment = build_deployment(o.deployment);
  uint64_t max_shard = parse_size(o.max_shard_size);
  const ckpt::CheckpointLocation where = ckpt::locate_checkpoint(o.checkpoint);
  ckpt::Checkpoint checkpoint = ckpt::open_checkpoint(where.path);
  auto decisions = convert::decide_layers(checkpoint, deployment);
  warn_of_hazards(decisions, deployment);
  convert::ConvertRequest request;
  if (o.deployment.tp_rank >= 0) request.only_rank = o.deployment.tp_rank;
  request.target_json = convert::target_json(deployment);
  convert::ConversionPlan plan = convert::build_conversion_plan(checkpoint, decisions, request);
  plan.source_model_id = where.model_id;
  plan.source_revision = where.revision;
  plan.source_commit = where.commit;
  if (plan.layers.empty()) std::cerr << "moepack: note: " << o.checkpoint << " has no MoE layers; everything is copied unchanged\n";

  if (o.dry_run) {
    auto shards = convert::assign_shards(plan, max_shard);
    if (o.json) std::cout << safe_json_text(report::dry_run_json(plan, shards)) << std::endl;
    else print_dry_run(plan, shards);
    return;
  }

  if (!o.allow_bad_values) convert::refuse_bad_values(checkpoint, where.path);

  install_cancel_signal_handlers();
  auto start = std::chrono::steady_clock::now();
  convert::StagingDirectory staging(o.output, o.force);
  convert::ExecutorOptions exec;
  exec.threads = o.threads;
  exec.max_shard_bytes = max_shard;
  exec.show_progress = progress_wanted(global_flags().quiet, global_flags().progress);
  artifact::Manifest manifest = convert::execute_plan(plan, staging.path(), exec);
  staging.commit();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  uint64_t bytes = 0;
  for (const auto& f : manifest.files) bytes += f.bytes;
  if (o.json) {
    nlohmann::ordered_json j = {{"output", o.output}, {"files", manifest.files.size()}, {"bytes", bytes},
                                {"layers", manifest.layers.size()}, {"seconds", seconds}};
    std::cout << safe_json_text(j) << std::endl;
  } else if (!global_flags().quiet) {
    std::cerr << "moepack: wrote " << o.output << ": " << manifest.layers.size() << " MoE layers, " << manifest.files.size()
              << " files, " << human_bytes(bytes) << " in " << std::fixed << std::setprecision(seconds < 10 ? 2 : 1) << seconds << " s ("
              << human_bytes(seconds > 0 ? static_cast<uint64_t>(static_cast<double>(bytes) / seconds) : 0) << "/s)\n";
  }
}

CommandRegistration registration(40, [](CLI::App& app) {
  auto opts = std::make_shared<ConvertOptions>();
  CLI::App* sub = app.add_subcommand("convert", "Write the prepacked artifact of a checkpoint for a target deployment");
  sub->add_option("checkpoint", opts->checkpoint, "Checkpoint directory, .safetensors file, or model id in the Hugging Face cache (org/name[@revision])")->required();
  sub->add_option("-o,--output", opts->output, "Output directory (written as OUT.tmp, renamed when complete)")->required();
  add_deployment_flags(*sub, opts->deployment, true);
  sub->add_option("--threads", opts->threads, "Worker threads (default: the CPUs this process may use); the output does not depend on it")->check(CLI::Range(0, 1 << 16).description(""));
  sub->add_flag("--dry-run", opts->dry_run, "Print the tensors, sizes, layouts and files that would be written; write nothing");
  sub->add_flag("--force", opts->force, "Replace an existing output directory");
  sub->add_option("--max-shard-size", opts->max_shard_size, "Largest safetensors file (default 5GB; units B KB MB GB KiB MiB GiB)");
  sub->add_flag("--allow-bad-values", opts->allow_bad_values, "Convert even when source tensors hold NaN/Inf or reserved scale codes");
  sub->add_flag("--json", opts->json, "JSON output (the dry-run plan, or a summary)");
  sub->callback([opts] { run_convert(*opts); });
});

}  // namespace
}  // namespace moepack::cli
