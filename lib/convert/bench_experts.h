// `moepack bench experts`: times the runtime experts on one MoE layer of an artifact and states
// the result as fractions of this machine's limits measured in the same run (moepack-bench(1),
// its --json document in lib/report/runtime_reports): a streaming read of a buffer much larger than the caches (memory bandwidth),
// and oneDNN's bf16 matmul on the same routed shapes with dequantized weights (when this build
// has oneDNN). Decode (few tokens) is bound by the packed weight bytes the routed experts read;
// prefill (many tokens) by arithmetic. Medians of several runs; the machine is shared and noisy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moepack::convert {

struct BenchOptions {
  std::string artifact;
  std::optional<std::string> layer;       // prefix; default the first layer
  std::vector<uint64_t> tokens = {1, 8, 64, 512};
  int threads = 0;                          // 0: all hardware threads
  uint64_t seed = 0;
  double min_seconds = 0.5;                 // per measurement: repeat until this much time is spent
};

struct BenchResult {
  uint64_t tokens = 0;
  double ms = 0;                 // one forward of the layer, median
  uint64_t weight_bytes = 0;     // packed bytes of the experts this batch routes to
  double gbps = 0, fraction_of_stream = 0;
  double gflops = 0;
  std::optional<double> onednn_bf16_gflops, ratio_to_onednn;
};

struct BenchReport {
  std::string cpu;
  int threads = 0;
  std::string isa;
  double stream_read_gbps = 0;
  std::optional<double> onednn_bf16_gflops;  // at the layer's largest GEMM shape
  std::string prefix, layout;
  uint64_t num_experts = 0, top_k = 0, hidden_size = 0, intermediate_size = 0;
  std::vector<BenchResult> results;
};

// Throws Error(usage) when the layer has no fast CPU experts (only CPU layouts are benchmarked:
// the emulation of GPU layouts is a proof, not a runtime).
BenchReport bench_experts(const BenchOptions& options);

// Whether this build measures oneDNN.
bool bench_has_onednn();

}  // namespace moepack::convert
