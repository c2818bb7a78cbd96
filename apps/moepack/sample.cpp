// `moepack sample`: writes a synthetic checkpoint of one family (lib/synth), or lists them.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/moepack/command.h"
#include "lib/core/error.h"
#include "lib/core/json_output.h"
#include "lib/synth/synth.h"

namespace moepack::cli {
namespace {

struct SampleArgs {
  std::string family;
  std::string output;
  uint64_t seed = 0;
  int experts = 0;
  int layers = 0;
  int hash_layers = 0;
  std::string real_shape;
  bool sparse = false;
  bool force = false;
  bool list = false;
  bool json = false;
};

void print_list(bool as_json) {
  if (as_json) {
    nlohmann::ordered_json j = {{"families", nlohmann::ordered_json::array()}, {"real_shape_models", nlohmann::ordered_json::array()}};
    for (const auto& f : synth::family_table())
      j["families"].push_back({{"name", f.name}, {"arch", f.arch}, {"summary", f.summary}});
    for (const auto& m : synth::real_shape_models())
      j["real_shape_models"].push_back({{"name", m.name}, {"arch", m.arch}, {"default_family", m.default_family}});
    std::cout << safe_json_text(j) << std::endl;
    return;
  }
  std::printf("families:\n");
  for (const auto& f : synth::family_table()) std::printf("  %-22s %-12s %s\n", f.name.c_str(), f.arch.c_str(), f.summary.c_str());
  std::printf("real-shape models (--real-shape MODEL --sparse):\n");
  for (const auto& m : synth::real_shape_models())
    std::printf("  %-22s %-12s default family %s\n", m.name.c_str(), m.arch.c_str(), m.default_family.c_str());
}

int run_sample(const SampleArgs& a) {
  if (a.list) {
    print_list(a.json);
    return 0;
  }
  if (a.family.empty() && a.real_shape.empty()) throw Error(ErrorKind::usage, "sample: --family is required (or --list)");
  if (a.output.empty()) throw Error(ErrorKind::usage, "sample: -o/--output is required");
  if (!a.real_shape.empty() && !a.sparse)
    throw Error(ErrorKind::usage, "sample: --real-shape writes an all-zero sparse data region; pass --sparse to confirm");
  if (a.real_shape.empty() && a.sparse) throw Error(ErrorKind::usage, "sample: --sparse only applies to --real-shape");
  synth::SampleOptions o;
  o.seed = a.seed;
  o.experts = a.experts;
  o.layers = a.layers;
  o.hash_layers = a.hash_layers;
  o.real_shape = a.real_shape;
  o.force = a.force;
  synth::WriteReport r = synth::write_sample(a.family, a.output, o);
  if (a.json) {
    nlohmann::ordered_json j = {{"dir", r.dir}, {"files", r.files}, {"tensors", r.tensors}, {"data_bytes", r.data_bytes}};
    std::cout << safe_json_text(j) << std::endl;
  } else if (!global_flags().quiet) {
    std::printf("wrote %s: %zu files, %llu tensors, %llu bytes of tensor data\n", r.dir.c_str(), r.files.size(),
                static_cast<unsigned long long>(r.tensors), static_cast<unsigned long long>(r.data_bytes));
  }
  return 0;
}

CommandRegistration reg(90, [](CLI::App& app) {
  auto args = std::make_shared<SampleArgs>();
  auto* sub = app.add_subcommand("sample", "Write a synthetic checkpoint of one family (tests, samples, benchmarks)");
  sub->add_option("--family", args->family, "Checkpoint family (see --list)");
  sub->add_option("-o,--output", args->output, "Output directory (written atomically)");
  sub->add_option("--seed", args->seed, "Seed of the random weights (same seed, same bytes)");
  sub->add_option("--experts", args->experts, "Routed experts per MoE layer")->check(whole_number(2, 1 << 16));
  sub->add_option("--layers", args->layers, "MoE layers (small samples) or leading decoder layers (--real-shape)")
      ->check(whole_number(1, 1 << 12));
  sub->add_option("--hash-layers", args->hash_layers, "DeepSeek-V4: leading layers routed by token id (num_hash_layers, gate.tid2eid)")
      ->check(whole_number(0, 1 << 12));
  sub->add_option("--real-shape", args->real_shape, "Copy the tensor shapes of a released model (see --list)");
  sub->add_flag("--sparse", args->sparse, "With --real-shape: all-zero data region made sparse with ftruncate");
  sub->add_flag("--force", args->force, "Replace an existing output directory");
  sub->add_flag("--list", args->list, "List the families and real-shape models");
  sub->add_flag("--json", args->json, "Machine-readable output");
  sub->callback([args] {
    global_flags().json = args->json;
    set_exit_code(run_sample(*args));
  });
});

}  // namespace
}  // namespace moepack::cli
