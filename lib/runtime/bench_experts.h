// `moepack bench experts`: times the runtime experts on one MoE layer of an artifact and states
// the result as fractions of this machine's limits measured in the same run (moepack-bench(1),
// its --json document in lib/report/runtime_reports): a streaming read of a buffer much larger than the caches (memory bandwidth),
// and oneDNN's f32 and bf16 matmuls on the same routed shapes with dense weights (when this
// build has oneDNN), the faster of the two being the peer. Decode (few tokens) is bound by the packed weight bytes the routed experts read;
// prefill (many tokens) by arithmetic. Medians of several runs; the machine is shared and noisy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moepack::runtime {

struct BenchOptions {
  std::string artifact;
  std::optional<std::string> layer;       // prefix; default the first layer
  std::vector<uint64_t> tokens = {1, 8, 64, 512};
  int threads = 0;                          // 0: the CPUs this process may use (lib/core/cpus.h)
  uint64_t seed = 0;
  double min_seconds = 0.5;                 // per measurement: repeat until this much time is spent
};

// oneDNN's dense matmul (f32 and bf16 inputs, f32 output, weights in the blocked layout oneDNN
// picks for itself) on some shapes: the fastest dense GEMM this machine has is the peer.
struct OneDnnPeers {
  std::optional<double> f32_gflops, bf16_gflops;
  // The faster of the two ("f32" or "bf16") and its figure; empty without oneDNN.
  std::string peer_dtype() const;
  std::optional<double> peer_gflops() const;
};

struct BenchResult {
  uint64_t tokens = 0;
  double ms = 0;                 // one forward of the layer, median
  uint64_t weight_bytes = 0;     // packed bytes of the experts a batch routes to (mean over the routings)
  // Routings taken in turn by the timed forwards (bench_experts: enough that their experts'
  // weights together exceed the last-level cache four times, as a model's other layers would
  // evict them between tokens), and those experts' bytes together.
  uint64_t routings = 1;
  uint64_t rotation_bytes = 0;
  double gbps = 0, fraction_of_stream = 0;
  double gflops = 0;
  OneDnnPeers onednn;            // the same routed GEMMs: each expert's w13 and w2 over its rows
  std::optional<double> ratio_to_onednn;  // gflops over the faster oneDNN dtype's
};

struct BenchReport {
  std::string cpu;
  int threads = 0;
  int allowed_cpus = 0;                     // what the process may use (affinity mask, cgroup quota)
  std::string isa;
  std::vector<std::string> kernel_choices;  // the choices within the level (experts::cpu_kernel_choice_names)
  double stream_read_gbps = 0;
  uint64_t last_level_cache_bytes = 0;      // 0 when this machine does not say
  // oneDNN on one expert's w13 and w2 at the rows an expert gets in a 512-token batch
  // (512 x top_k / num_experts, rounded up): onednn_rows x hidden -> 2 x intermediate, and
  // onednn_rows x intermediate -> hidden (padded sizes).
  OneDnnPeers onednn;
  uint64_t onednn_rows = 0;
  // The instruction set oneDNN ran with (its names: avx2, avx512_core, avx512_core_bf16, ...):
  // held to the experts' tier when MOEPACK_CPU_ISA puts them below this machine's best.
  std::string onednn_isa;
  std::string prefix, layout;
  uint64_t num_experts = 0, top_k = 0, hidden_size = 0, intermediate_size = 0;
  uint64_t padded_hidden_size = 0, padded_intermediate_size = 0, w13_rows = 0;
  std::vector<BenchResult> results;
};

// Throws Error(usage) when the layer has no fast CPU experts (only CPU layouts are benchmarked:
// the emulation of GPU layouts is a proof, not a runtime).
BenchReport bench_experts(const BenchOptions& options);

// Whether this build measures oneDNN.
bool bench_has_onednn();

}  // namespace moepack::runtime
