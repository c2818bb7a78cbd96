// `moepack bench experts ARTIFACT [--layer PREFIX] [--tokens 1,8,64,512] [--threads N] [--seed S] [--json]`
// (moepack-bench(1)): lib/convert/bench_experts times, lib/report builds the --json document,
// this file prints.
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "apps/moepack/command.h"
#include "lib/runtime/bench_experts.h"
#include "lib/core/error.h"
#include "lib/core/json_output.h"
#include "lib/report/runtime_reports.h"

namespace moepack::cli {
namespace {

struct BenchCliOptions {
  runtime::BenchOptions bench;
  std::string layer, tokens = "1,8,64,512";
  bool json = false;
};

std::vector<uint64_t> parse_tokens(const std::string& text) {
  std::vector<uint64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t pos = 0;
    unsigned long long v = 0;
    try {
      v = std::stoull(item, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos != item.size() || v == 0 || v > 1u << 20) throw Error(ErrorKind::usage, "--tokens: `" + item + "` is not a token count (1 to 1048576; e.g. 1,8,64,512)");
    out.push_back(v);
  }
  if (out.empty()) throw Error(ErrorKind::usage, "--tokens needs at least one count");
  return out;
}

// A oneDNN figure, or "-" where oneDNN has no implementation of that dtype on this CPU.
std::string gflops_text(const std::optional<double>& gflops) {
  if (!gflops) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", *gflops);
  return text;
}

int run_bench(BenchCliOptions& o) {
  if (!o.layer.empty()) o.bench.layer = o.layer;
  o.bench.tokens = parse_tokens(o.tokens);
  const runtime::BenchReport r = runtime::bench_experts(o.bench);
  if (o.json) {
    std::cout << safe_json_text(report::bench_json(r)) << std::endl;
    return 0;
  }
  std::string choices;
  for (const std::string& c : r.kernel_choices) choices += (choices.empty() ? " (" : ", ") + c;
  if (!choices.empty()) choices += ")";
  std::printf("machine  %s, %d threads (%d CPUs allowed), %s kernels%s; stream read %.1f GB/s\n", r.cpu.c_str(), r.threads, r.allowed_cpus, r.isa.c_str(),
              choices.c_str(), r.stream_read_gbps);
  if (r.onednn.peer_gflops())
    std::printf("oneDNN   %s, %llu x %llu -> %llu and %llu x %llu -> %llu: f32 %s, bf16 %s GFLOP/s (peer: %s)\n", r.onednn_isa.c_str(), static_cast<unsigned long long>(r.onednn_rows),
                static_cast<unsigned long long>(r.padded_hidden_size), static_cast<unsigned long long>(r.w13_rows), static_cast<unsigned long long>(r.onednn_rows),
                static_cast<unsigned long long>(r.padded_intermediate_size), static_cast<unsigned long long>(r.padded_hidden_size), gflops_text(r.onednn.f32_gflops).c_str(),
                gflops_text(r.onednn.bf16_gflops).c_str(), r.onednn.peer_dtype().c_str());
  std::printf("layer    %s: %llu experts, top-%llu, hidden %llu, intermediate %llu (%s)\n", r.prefix.c_str(), static_cast<unsigned long long>(r.num_experts),
              static_cast<unsigned long long>(r.top_k), static_cast<unsigned long long>(r.hidden_size), static_cast<unsigned long long>(r.intermediate_size), r.layout.c_str());
  std::printf("%8s %10s %12s %8s %9s %9s %10s %10s %9s\n", "tokens", "ms", "weight MB", "GB/s", "of stream", "GFLOP/s", "oneDNN f32", "bf16", "/ peer");
  for (const auto& x : r.results) {
    std::printf("%8llu %10.3f %12.1f %8.1f %8.0f%% %9.1f", static_cast<unsigned long long>(x.tokens), x.ms, static_cast<double>(x.weight_bytes) / 1e6, x.gbps,
                100 * x.fraction_of_stream, x.gflops);
    if (x.ratio_to_onednn)
      std::printf(" %10s %10s %8.2fx %s", gflops_text(x.onednn.f32_gflops).c_str(), gflops_text(x.onednn.bf16_gflops).c_str(), *x.ratio_to_onednn,
                  x.onednn.peer_dtype().c_str());
    std::printf("\n");
  }
  // Where the timed forwards took turns over several routings (so the weights came from memory).
  for (const auto& x : r.results)
    if (x.routings > 1)
      std::printf("%llu token%s: %llu routings in turn, %.1f MB of experts together (last-level cache %.1f MB)\n", static_cast<unsigned long long>(x.tokens), x.tokens == 1 ? "" : "s",
                  static_cast<unsigned long long>(x.routings), static_cast<double>(x.rotation_bytes) / 1e6, static_cast<double>(r.last_level_cache_bytes) / 1e6);
  return 0;
}

CommandRegistration reg(70, [](CLI::App& app) {
  auto opts = std::make_shared<BenchCliOptions>();
  auto* bench = app.add_subcommand("bench", "Time the runtime experts against this machine's measured limits");
  bench->require_subcommand(1);
  auto* ex = bench->add_subcommand("experts", "Time the fast CPU experts on one MoE layer of a cpu-amx artifact");
  ex->add_option("ARTIFACT", opts->bench.artifact, "Artifact directory (converted for cpu-amx)")->required();
  ex->add_option("--layer", opts->layer, "MoE layer prefix (default: the first)");
  ex->add_option("--tokens", opts->tokens, "Token counts, comma-separated (default 1,8,64,512)");
  ex->add_option("--threads", opts->bench.threads, "Threads (default: the CPUs this process may use)");
  ex->add_option("--seed", opts->bench.seed, "Seed of the activations and routing");
  ex->add_flag("--json", opts->json, "Print one JSON object (shape in moepack-bench(1))");
  ex->callback([opts] {
    global_flags().json = opts->json;
    set_exit_code(run_bench(*opts));
  });
});

}  // namespace
}  // namespace moepack::cli
