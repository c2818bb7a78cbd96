// `moepack convert CKPT --target D -o OUT`: plans (lib/convert/plan), checks values
// (lib/convert/bad_values), then streams the artifact through a staging directory
// (lib/convert/executor, staging). `--target A,B,C` plans every device first (any refusal
// before a write), then writes OUT/A, OUT/B, OUT/C in one pass over the source. Parsing and printing only; the --dry-run --json document is
// lib/report's.
#include <algorithm>
#include <chrono>
#include <filesystem>
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
void warn_of_hazards(const std::vector<convert::LayerDecision>& decisions, const oracle::Deployment& deployment, const std::string& device_label) {
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
    std::cerr << "moepack: warning: " << device_label << where << ": known kernel defect " << hazard.id << ": " << hazard.effect << " (seen: " << hazard.seen
              << ")\n";
  }
}

// One artifact convert writes: its device, its plan, and where it goes.
struct TargetConversion {
  std::string name;    // the device as named on the command line (the artifact's directory with several)
  std::string output;  // OUT, or OUT/<name> with several targets
  oracle::Deployment deployment;
  convert::ConversionPlan plan;
};

// One device's deployment and output, before anything is read: unknown devices and bad flags
// are usage errors first.
TargetConversion target_of(const ConvertOptions& o, const std::string& name, bool several) {
  TargetConversion t;
  t.name = name;
  t.output = several ? o.output + "/" + name : o.output;
  DeploymentOptions flags = o.deployment;
  flags.target = name;
  t.deployment = build_deployment(flags);
  return t;
}

// Plans one device's conversion. With several devices a refusal names the device.
void plan_target(const ConvertOptions& o, TargetConversion& t, bool several, const ckpt::Checkpoint& checkpoint,
                 const ckpt::CheckpointLocation& where) {
  const std::string& name = t.name;
  try {
    auto decisions = convert::decide_layers(checkpoint, t.deployment);
    warn_of_hazards(decisions, t.deployment, several ? name + ": " : "");
    convert::ConvertRequest request;
    if (o.deployment.tp_rank >= 0) request.only_rank = o.deployment.tp_rank;
    request.target_json = convert::target_json(t.deployment);
    t.plan = convert::build_conversion_plan(checkpoint, decisions, request);
  } catch (const Error& e) {
    if (!several) throw;
    throw Error(e.kind(), "--target " + name + ": " + e.what());
  }
  t.plan.source_model_id = where.model_id;
  t.plan.source_revision = where.revision;
  t.plan.source_commit = where.commit;
}

// The devices of --target: one, or a comma list (each its own artifact under OUT). `all` is
// plan's question; a conversion names the devices it prepares.
std::vector<std::string> devices_to_convert(const std::string& target) {
  if (!names_several_targets(target)) return {target};
  if (target == "all")
    throw Error(ErrorKind::usage, "convert writes the devices it is given: name them (--target sm90,sm100,cpu-amx); `moepack plan CKPT --target all` shows which devices run this checkpoint");
  return target_names(target);
}

void print_summary(const ConvertOptions& o, const std::vector<TargetConversion>& targets, const std::vector<artifact::Manifest>& manifests,
                   bool several, double seconds) {
  auto bytes_of = [](const artifact::Manifest& m) {
    uint64_t bytes = 0;
    for (const auto& f : m.files) bytes += f.bytes;
    return bytes;
  };
  if (o.json) {
    auto summary = [&](size_t i) {
      return nlohmann::ordered_json{{"output", targets[i].output}, {"files", manifests[i].files.size()}, {"bytes", bytes_of(manifests[i])},
                                    {"layers", manifests[i].layers.size()}};
    };
    nlohmann::ordered_json j;
    if (!several) {
      j = summary(0);
    } else {
      j = {{"output", o.output}, {"artifacts", nlohmann::ordered_json::array()}};
      for (size_t i = 0; i < targets.size(); ++i) {
        nlohmann::ordered_json a = {{"device", targets[i].name}};
        a.update(summary(i));
        j["artifacts"].push_back(std::move(a));
      }
    }
    j["seconds"] = seconds;
    std::cout << safe_json_text(j) << std::endl;
    return;
  }
  if (global_flags().quiet) return;
  uint64_t total = 0;
  for (size_t i = 0; i < targets.size(); ++i) {
    total += bytes_of(manifests[i]);
    std::cerr << "moepack: wrote " << targets[i].output << ": " << manifests[i].layers.size() << " MoE layers, " << manifests[i].files.size() << " files, "
              << human_bytes(bytes_of(manifests[i])) << (several ? "\n" : "");
  }
  std::cerr << (several ? "moepack: " + std::to_string(targets.size()) + " artifacts, " + human_bytes(total) : std::string()) << " in " << std::fixed
            << std::setprecision(seconds < 10 ? 2 : 1) << seconds << " s ("
            << human_bytes(seconds > 0 ? static_cast<uint64_t>(static_cast<double>(total) / seconds) : 0) << "/s)\n";
}

void run_convert(const ConvertOptions& o) {
  global_flags().json = o.json;
  const std::vector<std::string> names = devices_to_convert(o.deployment.target);
  const bool several = names.size() > 1;
  uint64_t max_shard = parse_size(o.max_shard_size);
  std::vector<TargetConversion> targets;
  for (const auto& name : names) targets.push_back(target_of(o, name, several));
  const ckpt::CheckpointLocation where = ckpt::locate_checkpoint(o.checkpoint);
  ckpt::Checkpoint checkpoint = ckpt::open_checkpoint(where.path);
  // Every device is planned (and any refusal raised) before anything is written.
  for (auto& t : targets) plan_target(o, t, several, checkpoint, where);
  if (targets.front().plan.layers.empty())
    std::cerr << "moepack: note: " << o.checkpoint << " has no MoE layers; everything is copied unchanged\n";

  if (o.dry_run) {
    if (o.json) {
      nlohmann::ordered_json j;
      if (!several) {
        j = report::dry_run_json(targets[0].plan, convert::assign_shards(targets[0].plan, max_shard));
      } else {
        j = {{"dry_run", true}, {"output", o.output}, {"artifacts", nlohmann::ordered_json::array()}};
        for (const auto& t : targets) {
          nlohmann::ordered_json a = {{"device", t.name}, {"output", t.output}};
          a.update(report::dry_run_json(t.plan, convert::assign_shards(t.plan, max_shard)));
          j["artifacts"].push_back(std::move(a));
        }
      }
      std::cout << safe_json_text(j) << std::endl;
    } else {
      for (const auto& t : targets) {
        if (several) std::cout << (&t == &targets.front() ? "" : "\n") << "== " << t.name << " -> " << t.output << "\n";
        print_dry_run(t.plan, convert::assign_shards(t.plan, max_shard));
      }
    }
    return;
  }

  if (!o.allow_bad_values) convert::refuse_bad_values(checkpoint, where.path);

  install_cancel_signal_handlers();
  auto start = std::chrono::steady_clock::now();
  // With several targets OUT is staged whole (OUT.tmp/<device>/...) and appears complete or not at all.
  convert::StagingDirectory staging(o.output, o.force);
  std::vector<convert::PlannedArtifact> artifacts;
  for (const auto& t : targets) {
    const std::string dir = several ? staging.file(t.name) : staging.path();
    std::error_code ec;
    if (several && !std::filesystem::create_directory(dir, ec)) throw_io(dir, "cannot create: " + ec.message(), ec.value());
    artifacts.push_back({&t.plan, dir, several ? t.name : ""});
  }
  convert::ExecutorOptions exec;
  exec.threads = o.threads;
  exec.max_shard_bytes = max_shard;
  exec.show_progress = progress_wanted(global_flags().quiet, global_flags().progress);
  const std::vector<artifact::Manifest> manifests = convert::execute_plans(artifacts, exec);
  staging.commit();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  print_summary(o, targets, manifests, several, seconds);
}

CommandRegistration registration(40, [](CLI::App& app) {
  auto opts = std::make_shared<ConvertOptions>();
  CLI::App* sub = app.add_subcommand("convert", "Write the prepacked artifact of a checkpoint for a target deployment");
  sub->add_option("checkpoint", opts->checkpoint, "Checkpoint directory, .safetensors file, or model id in the Hugging Face cache (org/name[@revision])")->required();
  sub->add_option("-o,--output", opts->output, "Output directory (written as OUT.tmp, renamed when complete); with several targets, one artifact per device in OUT/<device>")->required();
  add_deployment_flags(*sub, opts->deployment, true);
  sub->add_option("--threads", opts->threads, "Worker threads (default: the CPUs this process may use); the output does not depend on it")->check(whole_number(0, 1 << 16));
  sub->add_flag("--dry-run", opts->dry_run, "Print the tensors, sizes, layouts and files that would be written; write nothing");
  sub->add_flag("--force", opts->force, "Replace an existing output directory");
  sub->add_option("--max-shard-size", opts->max_shard_size, "Largest safetensors file (default 5GB; units B KB MB GB KiB MiB GiB)");
  sub->add_flag("--allow-bad-values", opts->allow_bad_values, "Convert even when source tensors hold NaN/Inf or reserved scale codes");
  sub->add_flag("--json", opts->json, "JSON output (the dry-run plan, or a summary)");
  sub->callback([opts] { run_convert(*opts); });
});

}  // namespace
}  // namespace moepack::cli
