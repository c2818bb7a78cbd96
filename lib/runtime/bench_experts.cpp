#include "lib/runtime/bench_experts.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include <unistd.h>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>
#include <tbb/task_arena.h>

#include "lib/runtime/artifact_runtime.h"
#include "lib/core/cpus.h"
#include "lib/core/error.h"
#include "lib/experts/cpu_experts.h"
#include "lib/experts/seeded.h"

#ifdef MOEPACK_HAVE_ONEDNN
#include <dlfcn.h>

#include <deque>
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace moepack::runtime {
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

// The largest cache of CPU 0 (sysfs: the highest index), or what glibc reads from cpuid; 0 when
// neither says.
uint64_t last_level_cache_bytes() {
  uint64_t best = 0;
  int best_level = -1;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream level_in(dir + "level"), size_in(dir + "size");
    int level = 0;
    std::string size;
    if (!(level_in >> level) || !(size_in >> size) || size.empty()) continue;
    uint64_t bytes = std::strtoull(size.c_str(), nullptr, 10);
    if (size.back() == 'K') bytes <<= 10;
    else if (size.back() == 'M') bytes <<= 20;
    if (level > best_level || (level == best_level && bytes > best)) best = bytes, best_level = level;
  }
  if (best == 0) {
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    best = static_cast<uint64_t>(std::max<long>({l3, l2, 0}));
  }
  return best;
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
// oneDNN's matmul of one input dtype, out [m, n] (f32) = src [m, k] · weights [k, n], the weights
// in the layout oneDNN picks (format_tag::any: its own prepacked blocks, as a runtime holding
// dense experts would keep them). Each (k, n) weight shape gets a pool of distinct buffers,
// used in turn, so that consecutive GEMMs read different weights as distinct experts do (a
// pool of one expert's weights would stay in the cache for small layers).
class OneDnnMatmul {
 public:
  OneDnnMatmul(dnnl::memory::data_type dtype, int threads) : dtype_(dtype), threads_(threads), engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {}

  // One GEMM of m rows through the next buffer of the (k, n) pool.
  void run(uint64_t m, uint64_t k, uint64_t n) {
    Primitive& p = primitive(m, k, n);
    Pool& pool = pool_for(p.weights_desc);
    const dnnl::memory& w = pool.buffers[pool.next++ % pool.buffers.size()];
    p.prim.execute(stream_, {{DNNL_ARG_SRC, p.src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, p.dst}});
    stream_.wait();
  }

  // Sets the OpenMP team size of the calling thread (Debian's oneDNN runs on libgomp, which
  // reads neither the TBB arena nor the cgroup quota), so oneDNN uses the bench's threads. A
  // oneDNN on another runtime has no omp_set_num_threads and keeps its own default.
  void use_threads() const {
    using SetThreads = void (*)(int);
    static const auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    if (set) set(threads_);
  }

 private:
  struct Primitive {
    dnnl::matmul prim;
    dnnl::memory::desc weights_desc;
    dnnl::memory src, dst;
  };
  struct Pool {
    dnnl::memory::desc desc;
    std::vector<dnnl::memory> buffers;
    size_t next = 0;
  };
  // Distinct weight buffers per shape: up to this many bytes, at least two.
  static constexpr size_t kPoolBytes = size_t{256} << 20;

  Primitive& primitive(uint64_t m, uint64_t k, uint64_t n) {
    const auto key = std::make_tuple(m, k, n);
    if (auto it = primitives_.find(key); it != primitives_.end()) return it->second;
    using tag = dnnl::memory::format_tag;
    const auto dim = [](uint64_t v) { return static_cast<dnnl::memory::dim>(v); };
    const dnnl::memory::desc src({dim(m), dim(k)}, dtype_, tag::ab), wei({dim(k), dim(n)}, dtype_, tag::any),
        dst({dim(m), dim(n)}, dnnl::memory::data_type::f32, tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, wei, dst), engine_);  // oneDNN 2.x (Debian 12)
    Primitive p{dnnl::matmul(pd), pd.weights_desc(), dnnl::memory(pd.src_desc(), engine_), dnnl::memory(pd.dst_desc(), engine_)};
    fill(p.src);
    return primitives_.emplace(key, std::move(p)).first->second;
  }

  Pool& pool_for(const dnnl::memory::desc& desc) {
    for (Pool& p : pools_)
      if (p.desc == desc) return p;
    Pool& p = pools_.emplace_back(Pool{desc, {}, 0});
    const size_t count = std::max<size_t>(2, kPoolBytes / std::max<size_t>(1, desc.get_size()));
    for (size_t i = 0; i < count; ++i) fill(p.buffers.emplace_back(desc, engine_));
    return p;
  }

  // Ones (f32 or bf16 bits, padding included): finite values, no subnormal slow paths.
  void fill(const dnnl::memory& mem) const {
    const size_t bytes = mem.get_desc().get_size();
    auto* data = static_cast<uint8_t*>(mem.get_data_handle());
    if (dtype_ == dnnl::memory::data_type::f32) std::fill_n(reinterpret_cast<float*>(data), bytes / 4, 1.0f);
    else std::fill_n(reinterpret_cast<uint16_t*>(data), bytes / 2, uint16_t{0x3F80});
  }

  dnnl::memory::data_type dtype_;
  int threads_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::map<std::tuple<uint64_t, uint64_t, uint64_t>, Primitive> primitives_;
  std::deque<Pool> pools_;
};
#endif

// GFLOP/s of oneDNN's f32 and bf16 matmuls over `gemms` (m, k, n), run in order as one pass
// (median over passes); none without oneDNN. Each dtype's buffers are freed before the next.
OneDnnPeers onednn_peers(const std::vector<std::array<uint64_t, 3>>& gemms, int threads, double min_seconds) {
  OneDnnPeers peers;
#ifdef MOEPACK_HAVE_ONEDNN
  double flops = 0;
  for (const auto& [m, k, n] : gemms) flops += 2.0 * static_cast<double>(m * k * n);
  for (const auto dtype : {dnnl::memory::data_type::f32, dnnl::memory::data_type::bf16}) {
    OneDnnMatmul dnn(dtype, threads);
    dnn.use_threads();
    try {
      for (const auto& [m, k, n] : gemms) dnn.run(m, k, n);  // primitives made and buffers filled before timing
    } catch (const dnnl::error&) {
      continue;  // no implementation on this CPU (oneDNN 2.x runs bf16 from AVX-512 on): that figure stays null
    }
    const double s = median_seconds(
        [&] {
          for (const auto& [m, k, n] : gemms) dnn.run(m, k, n);
        },
        min_seconds);
    (dtype == dnnl::memory::data_type::f32 ? peers.f32_gflops : peers.bf16_gflops) = flops / s / 1e9;
  }
#else
  (void)gemms, (void)threads, (void)min_seconds;
#endif
  return peers;
}

// Holds oneDNN to the instruction-set tier of the experts' level when that level is below the
// best this machine runs (MOEPACK_CPU_ISA forced it down), so that a level is compared with the
// best dense GEMM a machine of its tier has (an AVX2 kernel against an AVX-512 oneDNN would read
// as half as good as it is); then names the set oneDNN uses. Empty without oneDNN. oneDNN takes
// the cap only before its first primitive, so a later bench in one process keeps the first
// cap: the name says what was used either way.
std::string cap_onednn_isa(experts::CpuIsa level) {
#ifdef MOEPACK_HAVE_ONEDNN
  experts::CpuIsa machine_best = experts::CpuIsa::scalar;
  for (experts::CpuIsa l : experts::kCpuIsas)
    if (experts::cpu_supports(l)) {
      machine_best = l;
      break;
    }
  if (level != machine_best) {
    dnnl::cpu_isa cap = dnnl::cpu_isa::all;
    switch (level) {
      case experts::CpuIsa::amx_bf16: cap = dnnl::cpu_isa::avx512_core_amx; break;
      case experts::CpuIsa::avx512_bf16: cap = dnnl::cpu_isa::avx512_core_bf16; break;
      case experts::CpuIsa::avx512f: cap = dnnl::cpu_isa::avx512_core; break;  // Skylake-SP, the level's first CPUs
      case experts::CpuIsa::avx2: cap = dnnl::cpu_isa::avx2; break;
      case experts::CpuIsa::scalar: cap = dnnl::cpu_isa::sse41; break;  // oneDNN's least
    }
    dnnl::set_max_cpu_isa(cap);  // refused once oneDNN has run: the effective set below tells
  }
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
#else
  (void)level;
  return {};
#endif
}

}  // namespace

std::string OneDnnPeers::peer_dtype() const {
  if (!f32_gflops && !bf16_gflops) return {};
  return bf16_gflops.value_or(0) > f32_gflops.value_or(0) ? "bf16" : "f32";
}

std::optional<double> OneDnnPeers::peer_gflops() const {
  if (!f32_gflops && !bf16_gflops) return std::nullopt;
  return std::max(f32_gflops.value_or(0), bf16_gflops.value_or(0));
}

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
    throw Error(ErrorKind::usage, rt.manifest().layers[li].prefix + ": bench times the fast CPU experts, which read the x86 CPU MXFP4, BF16, FP8 block, " +
                                      "INT8 W8A8 and INT4 W4A16 layouts; this layer is " + rt.manifest().layers[li].backend + " / " + rt.manifest().layers[li].experts_class +
                                      " (convert with --target cpu-amx)");
  const artifact::Layer& L = rt.manifest().layers[li];
  const int threads = thread_count(o.threads);
  BenchReport rep;
  rep.cpu = cpu_name();
  rep.threads = threads;
  rep.allowed_cpus = allowed_cpus();
  rep.isa = std::string(experts::cpu_isa_name(experts::best_cpu_isa()));
  rep.kernel_choices = experts::cpu_kernel_choice_names(experts::best_cpu_isa(), experts::cpu_kernel_choice(experts::best_cpu_isa()));
  rep.onednn_isa = cap_onednn_isa(experts::best_cpu_isa());
  rep.prefix = L.prefix;
  // The w13 weight's layout, under the names its parameter has (GPTQ/AWQ qweight,
  // compressed-tensors weight_packed).
  for (const char* role : {"w13_weight", "w13_qweight", "w13_weight_packed"})
    if (auto it = L.ranks.at(0).tensors.find(role); it != L.ranks.at(0).tensors.end()) rep.layout = it->second.layout;
  rep.num_experts = L.num_experts;
  rep.top_k = L.top_k;
  rep.hidden_size = L.hidden_size;
  rep.intermediate_size = L.intermediate_size;
  const uint64_t Hp = L.padded_hidden_size, P = L.padded_intermediate_size, n13 = L.gated ? 2 * P : P;
  rep.padded_hidden_size = Hp;
  rep.padded_intermediate_size = P;
  rep.w13_rows = n13;
  // The GEMMs of one expert with m rows, as oneDNN's matmul takes them: [m, Hp] · [Hp, n13], then
  // [m, P] · [P, Hp].
  auto expert_gemms = [&](uint64_t m, std::vector<std::array<uint64_t, 3>>& out) {
    out.push_back({m, Hp, n13});
    out.push_back({m, P, Hp});
  };

  tbb::task_arena arena(threads);
  arena.execute([&] {
    rep.stream_read_gbps = stream_read_gbps();
    rep.last_level_cache_bytes = last_level_cache_bytes();
    // The machine's peer figure: one expert's GEMMs at the rows it gets in a 512-token batch.
    rep.onednn_rows = std::max<uint64_t>(1, (512 * L.top_k + L.num_experts - 1) / std::max<uint64_t>(1, L.num_experts));
    std::vector<std::array<uint64_t, 3>> one;
    expert_gemms(rep.onednn_rows, one);
    rep.onednn = onednn_peers(one, threads, o.min_seconds);
    for (uint64_t T : o.tokens) {
      if (T == 0) continue;
      const std::vector<float> x = experts::seeded_normal(o.seed * 2 + 1, T * L.hidden_size);
      const uint64_t vocab = rt.hash_vocab(li);  // DeepSeek-V4 hash layers route by token id
      // A forward of few tokens reads few experts, which a large last-level cache keeps from one
      // timed repeat to the next (one token of a Qwen3-30B-A3B layer read "144% of stream" that
      // way); in a model the other layers evict them between tokens. So the repeats take turns
      // over routings of other seeds until the experts they touch together hold four times the
      // cache (at most 64 routings; a layer smaller than that stays cached whatever is done).
      const uint64_t evict_bytes = 4 * rep.last_level_cache_bytes;
      std::vector<experts::Routing> rotation;
      experts::Routing together;  // every routing's ids, for the bytes they touch together
      uint64_t bytes_sum = 0;
      do {
        const uint64_t seed = o.seed * 2 + 2 + 7919 * rotation.size();
        const std::vector<float> logits = experts::seeded_normal(seed, T * L.num_experts);
        const std::vector<int64_t> ids = vocab ? experts::seeded_indices(seed + 1, T, vocab) : std::vector<int64_t>{};
        rotation.push_back(rt.route(li, logits, T, vocab ? &ids : nullptr));
        bytes_sum += rt.routed_weight_bytes(li, rotation.back());
        together.ids.insert(together.ids.end(), rotation.back().ids.begin(), rotation.back().ids.end());
      } while (rotation.size() < 64 && rt.routed_weight_bytes(li, together) < evict_bytes &&
               std::set<uint32_t>(together.ids.begin(), together.ids.end()).size() < L.num_experts);
      const experts::Routing& routing = rotation.front();
      experts::CpuExpertsOptions co;
      co.threads = threads;  // this arena's: every forward runs in it
      BenchResult r;
      r.tokens = T;
      r.routings = rotation.size();
      r.rotation_bytes = rt.routed_weight_bytes(li, together);
      for (const auto& each : rotation) rt.run_fast_cpu(li, x, each, T, co);  // pages mapped before the clock starts
      size_t turn = 0;
      const double s = median_seconds([&] { rt.run_fast_cpu(li, x, rotation[turn++ % rotation.size()], T, co); }, o.min_seconds);
      r.ms = s * 1e3;
      r.weight_bytes = bytes_sum / rotation.size();
      r.gbps = static_cast<double>(r.weight_bytes) / s / 1e9;
      r.fraction_of_stream = r.gbps / rep.stream_read_gbps;
      const double flops = 2.0 * static_cast<double>(T * routing.top_k) * static_cast<double>(n13 * Hp + Hp * P);
      r.gflops = flops / s / 1e9;
      // The same routed GEMMs through oneDNN: each expert's rows, in expert order.
      std::map<uint32_t, uint64_t> per_expert;
      for (uint32_t e : routing.ids) ++per_expert[e];
      std::vector<std::array<uint64_t, 3>> routed;
      for (const auto& [e, m] : per_expert) expert_gemms(m, routed);
      r.onednn = onednn_peers(routed, threads, o.min_seconds);
      if (const auto peer = r.onednn.peer_gflops()) r.ratio_to_onednn = r.gflops / *peer;
      rep.results.push_back(r);
    }
    // The stream figure once more, after the timed runs: on a shared machine one pass can fall
    // a third short of another minutes apart, and a low denominator would overstate every
    // fraction. The best of both stands for the machine's limit.
    if (!rep.results.empty()) {
      rep.stream_read_gbps = std::max(rep.stream_read_gbps, stream_read_gbps());
      for (BenchResult& r : rep.results) r.fraction_of_stream = r.gbps / rep.stream_read_gbps;
    }
  });
  return rep;
}

}  // namespace moepack::runtime
