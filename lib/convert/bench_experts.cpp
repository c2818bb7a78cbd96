#include "lib/convert/bench_experts.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>
#include <tbb/task_arena.h>

#include "lib/convert/artifact_runtime.h"
#include "lib/core/error.h"
#include "lib/experts/cpu_experts.h"
#include "lib/experts/seeded.h"

#ifdef MOEPACK_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace moepack::convert {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Runs `f` until `min_seconds` have passed (at least 3 times) and returns the median seconds.
template <typename F>
double median_seconds(F&& f, double min_seconds) {
  std::vector<double> times;
  const auto start = Clock::now();
  while (times.size() < 3 || (seconds_since(start) < min_seconds && times.size() < 1000)) {
    const auto t0 = Clock::now();
    f();
    times.push_back(seconds_since(t0));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

// A read-only pass over a buffer far larger than the caches, spread over the arena's threads:
// what streaming the routed experts' weights can reach at best. Best of several passes.
double stream_read_gbps() {
  const size_t bytes = size_t{1} << 30;
  std::vector<uint64_t> buffer(bytes / 8);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, buffer.size()), [&](const tbb::blocked_range<size_t>& r) {
    for (size_t i = r.begin(); i < r.end(); ++i) buffer[i] = i;
  });
  double best = 0;
  for (int pass = 0; pass < 5; ++pass) {
    const auto t0 = Clock::now();
    const uint64_t sum = tbb::parallel_reduce(
        tbb::blocked_range<size_t>(0, buffer.size(), size_t{1} << 16), uint64_t{0},
        [&](const tbb::blocked_range<size_t>& r, uint64_t acc) {
          uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
          size_t i = r.begin();
          for (; i + 4 <= r.end(); i += 4) a0 += buffer[i], a1 += buffer[i + 1], a2 += buffer[i + 2], a3 += buffer[i + 3];
          for (; i < r.end(); ++i) a0 += buffer[i];
          return acc + a0 + a1 + a2 + a3;
        },
        [](uint64_t a, uint64_t b) { return a + b; });
    const double s = seconds_since(t0);
    if (sum == 42) std::fputs("", stderr);  // keeps the reads
    best = std::max(best, static_cast<double>(bytes) / s / 1e9);
  }
  return best;
}

#ifdef MOEPACK_HAVE_ONEDNN
// oneDNN's bf16 matmul, out [m, n] (f32) = src [m, k] · weights [k, n], the weights as a runtime
// would hold dequantized experts. Primitives are cached per shape.
class OneDnnMatmul {
 public:
  OneDnnMatmul() : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {}
  struct Gemm {
    dnnl::matmul prim;
    dnnl::memory src, wei, dst;
  };
  Gemm& get(uint64_t m, uint64_t k, uint64_t n, void* weights) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    const dnnl::memory::dims ds = {static_cast<int64_t>(m), static_cast<int64_t>(k)}, dw = {static_cast<int64_t>(k), static_cast<int64_t>(n)},
                             dd = {static_cast<int64_t>(m), static_cast<int64_t>(n)};
    dnnl::memory::desc src(ds, dt::bf16, tag::ab), wei(dw, dt::bf16, tag::ab), dst(dd, dt::f32, tag::ab);
    auto key = std::make_tuple(m, k, n, weights);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, wei, dst), engine_);  // oneDNN 2.x (Debian 12)
    Gemm g{dnnl::matmul(pd), dnnl::memory(src, engine_), dnnl::memory(wei, engine_, weights), dnnl::memory(dst, engine_)};
    return cache_.emplace(key, std::move(g)).first->second;
  }
  void run(Gemm& g) {
    g.prim.execute(stream_, {{DNNL_ARG_SRC, g.src}, {DNNL_ARG_WEIGHTS, g.wei}, {DNNL_ARG_DST, g.dst}});
    stream_.wait();
  }

 private:
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::map<std::tuple<uint64_t, uint64_t, uint64_t, void*>, Gemm> cache_;
};
#endif

}  // namespace

bool bench_has_onednn() {
#ifdef MOEPACK_HAVE_ONEDNN
  return true;
#else
  return false;
#endif
}

BenchReport bench_experts(const BenchOptions& o) {
  ArtifactRuntime rt(o.artifact);
  const size_t li = o.layer ? rt.layer_index(*o.layer) : 0;
  if (rt.manifest().layers.empty()) throw Error(ErrorKind::usage, "the artifact has no MoE layers");
  if (!rt.has_fast_cpu(li))
    throw Error(ErrorKind::usage, rt.manifest().layers[li].prefix + ": bench times the fast CPU experts, which read the x86 CPU MXFP4, BF16, FP8 block and " +
                                      "INT8 W8A8 layouts; this layer is " + rt.manifest().layers[li].backend + " / " + rt.manifest().layers[li].experts_class +
                                      " (convert with --target cpu-amx)");
  const artifact::Layer& L = rt.manifest().layers[li];
  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  BenchReport rep;
  rep.cpu = cpu_name();
  rep.threads = threads;
  rep.isa = std::string(experts::cpu_isa_name(experts::best_cpu_isa()));
  rep.prefix = L.prefix;
  rep.layout = L.ranks.at(0).tensors.at("w13_weight").layout;
  rep.num_experts = L.num_experts;
  rep.top_k = L.top_k;
  rep.hidden_size = L.hidden_size;
  rep.intermediate_size = L.intermediate_size;
  const uint64_t Hp = L.padded_hidden_size, P = L.padded_intermediate_size, n13 = L.gated ? 2 * P : P;

  tbb::task_arena arena(threads);
  arena.execute([&] {
    rep.stream_read_gbps = stream_read_gbps();
#ifdef MOEPACK_HAVE_ONEDNN
    OneDnnMatmul dnn;
    // Dequantized weights of the experts a batch routes to, allocated as they are first needed.
    std::vector<std::vector<uint16_t>> w13(static_cast<size_t>(L.num_experts)), w2(static_cast<size_t>(L.num_experts));
    auto weights = [&](std::vector<uint16_t>& w, uint64_t n) -> void* {
      if (w.empty()) w.assign(static_cast<size_t>(n), 0x3F80);
      return w.data();
    };
    {
      const uint64_t m = std::max<uint64_t>(512, 1);
      auto& g = dnn.get(m, Hp, n13, weights(w13[0], Hp * n13));
      const double s = median_seconds([&] { dnn.run(g); }, o.min_seconds);
      rep.onednn_bf16_gflops = 2.0 * static_cast<double>(m * Hp * n13) / s / 1e9;
    }
#endif
    for (uint64_t T : o.tokens) {
      if (T == 0) continue;
      const std::vector<float> x = experts::seeded_normal(o.seed * 2 + 1, T * L.hidden_size), logits = experts::seeded_normal(o.seed * 2 + 2, T * L.num_experts);
      const uint64_t vocab = rt.hash_vocab(li);  // DeepSeek-V4 hash layers route by token id
      const std::vector<int64_t> ids = vocab ? experts::seeded_indices(o.seed * 2 + 3, T, vocab) : std::vector<int64_t>{};
      const experts::Routing routing = rt.route(li, logits, T, vocab ? &ids : nullptr);
      experts::CpuExpertsOptions co;  // runs inside this arena
      BenchResult r;
      r.tokens = T;
      const double s = median_seconds([&] { rt.run_fast_cpu(li, x, routing, T, co); }, o.min_seconds);
      r.ms = s * 1e3;
      r.weight_bytes = rt.routed_weight_bytes(li, routing);
      r.gbps = static_cast<double>(r.weight_bytes) / s / 1e9;
      r.fraction_of_stream = r.gbps / rep.stream_read_gbps;
      const double flops = 2.0 * static_cast<double>(T * routing.top_k) * static_cast<double>(n13 * Hp + Hp * P);
      r.gflops = flops / s / 1e9;
#ifdef MOEPACK_HAVE_ONEDNN
      std::map<uint32_t, uint64_t> per_expert;
      for (uint32_t e : routing.ids) ++per_expert[e];
      const double sd = median_seconds(
          [&] {
            for (auto [e, m] : per_expert) {
              dnn.run(dnn.get(m, Hp, n13, weights(w13[e], Hp * n13)));
              dnn.run(dnn.get(m, P, Hp, weights(w2[e], P * Hp)));
            }
          },
          o.min_seconds);
      r.onednn_bf16_gflops = flops / sd / 1e9;
      r.ratio_to_onednn = r.gflops / *r.onednn_bf16_gflops;
#endif
      rep.results.push_back(r);
    }
  });
  return rep;
}

}  // namespace moepack::convert
