// `moepack verify ARTIFACT [--source CKPT] [--tokens N] [--seed S] [--layers N] [--threads N] [--write-golden F | --golden F] [--json]`
// (docs/CLI.md): hashes, then every MoE layer run by the runtime experts and compared with the
// source's reference or a golden file (lib/convert/verify). Parsing and printing only; the --json document is lib/report's.
#include <cstdio>
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "apps/moepack/command.h"
#include "formats/checkpoints/hub_cache.h"
#include "lib/runtime/verify.h"
#include "lib/core/error.h"
#include "lib/core/json_output.h"
#include "lib/core/progress.h"
#include "lib/report/runtime_reports.h"

namespace moepack::cli {
namespace {

struct VerifyCliOptions {
  runtime::VerifyOptions verify;
  std::string source, write_golden, golden;
  uint64_t layers = 0;  // 0: every layer
  bool json = false;
};

void print_text(const runtime::VerifyReport& r, const VerifyCliOptions& o) {
  std::printf("%s\n", o.verify.artifact.c_str());
  std::printf("  integrity  %llu files, %llu packed tensors hashed%s", static_cast<unsigned long long>(r.integrity.files_checked),
              static_cast<unsigned long long>(r.integrity.tensors_checked), r.integrity.expert_slabs_checked ? "" : "\n");
  if (r.integrity.expert_slabs_checked)
    std::printf(", %llu expert slabs equal to their layout's packing of the source\n", static_cast<unsigned long long>(r.integrity.expert_slabs_checked));
  for (const auto& p : r.integrity.problems) std::printf("    PROBLEM %s\n", p.c_str());
  std::printf("  tokens     %llu, seed %llu\n", static_cast<unsigned long long>(r.tokens), static_cast<unsigned long long>(r.seed));
  if (r.layers_run != r.layers.size())
    std::printf("  quick mode %llu of %zu MoE layers checked against the source and run; the others only hashed\n",
                static_cast<unsigned long long>(r.layers_run), r.layers.size());
  for (const auto& l : r.layers) {
    if (!l.run) continue;  // counted in the quick mode line above; listed in --json
    std::printf("  %-4s %s (%s, %s%s)", l.ok ? "ok" : "FAIL", l.prefix.c_str(), l.family.c_str(), l.backend.c_str(),
                l.ranks > 1 ? (", " + std::to_string(l.ranks) + " ranks").c_str() : "");
    if (!l.compared_with.empty()) std::printf(": vs %s, max abs %.3g, rel %.3g (tolerance %.0e)", l.compared_with.c_str(), l.max_abs_error, l.max_rel_error, l.tolerance);
    else if (l.ok) std::printf(": ran; nothing to compare with (give --source or --golden)");
    std::printf("\n");
    if (!l.fast_cpu_isa.empty()) {
      std::string kernels = l.fast_cpu_isa;
      for (size_t i = 0; i < l.fast_cpu_kernel_choices.size(); ++i) kernels += (i == 0 ? "; " : ", ") + l.fast_cpu_kernel_choices[i];
      std::printf("       fast CPU experts (%s): rel %.3g (tolerance %.0e)\n", kernels.c_str(), l.fast_max_rel_error, l.fast_tolerance);
    }
    if (!l.note.empty()) std::printf("       %s\n", l.note.c_str());
  }
  for (const auto& p : r.golden_problems) std::printf("  golden FAIL %s\n", p.c_str());
  if (!o.write_golden.empty()) std::printf("  wrote golden file %s\n", o.write_golden.c_str());
}

int run_verify(VerifyCliOptions& o) {
  if (!o.source.empty()) o.verify.source = ckpt::locate_checkpoint(o.source).path;
  if (!o.write_golden.empty()) o.verify.write_golden = o.write_golden;
  if (!o.golden.empty()) o.verify.golden = o.golden;
  if (o.layers) o.verify.sample_layers = o.layers;
  o.verify.show_progress = progress_wanted(global_flags().quiet, global_flags().progress);
  const runtime::VerifyReport r = runtime::verify_artifact(o.verify);
  if (o.json) std::cout << safe_json_text(report::verify_json(r)) << std::endl;
  else print_text(r, o);
  if (!r.ok()) {
    std::fprintf(stderr, "moepack: error: verification failed for %s\n", o.verify.artifact.c_str());
    return static_cast<int>(ErrorKind::verify_failed);
  }
  return 0;
}

CommandRegistration reg(45, [](CLI::App& app) {
  auto opts = std::make_shared<VerifyCliOptions>();
  auto* sub = app.add_subcommand("verify", "Prove an artifact: hashes, then every MoE layer run and compared with the source or a golden file");
  sub->add_option("ARTIFACT", opts->verify.artifact, "Artifact directory written by convert")->required();
  sub->add_option("--source", opts->source, "The checkpoint the artifact was made from (the reference): a path or a model id in the Hugging Face cache");
  sub->add_option("--tokens", opts->verify.tokens, "Seeded tokens per layer (default 8)");
  sub->add_option("--seed", opts->verify.seed, "Seed of the hidden states and router logits (default 0)");
  auto* wg = sub->add_option("--write-golden", opts->write_golden, "Write the outputs and tensor hashes to this golden file");
  sub->add_option("--golden", opts->golden, "Compare with this golden file (its seed and tokens are used)")->excludes(wg);
  sub->add_option("--layers", opts->layers, "Quick mode: check against the source and run only N MoE layers, spread evenly (first and last included); every tensor is still hashed")
      ->check(whole_number(1, uint64_t{1} << 32));
  sub->add_option("--threads", opts->verify.threads, "Threads (default: the CPUs this process may use); the result is the same for any count")
      ->check(whole_number(0, 1 << 16));
  sub->add_flag("--json", opts->json, "Print one JSON object (shape in moepack-verify(1))");
  sub->callback([opts] {
    global_flags().json = opts->json;
    set_exit_code(run_verify(*opts));
  });
});

}  // namespace
}  // namespace moepack::cli
