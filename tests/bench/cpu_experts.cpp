// Benchmark (not a test): one packed GEMM of the fast CPU experts (cpu_packed_gemm) per layout
// and token count, on one thread, against this core's measured FMA peak; CPU time, so the
// figures hold on a machine other processes share (wall-clock figures are `moepack bench
// experts`'s job). One gpt-oss-20b w13 projection: 5760 rows x 2880 columns.
//   BM_PeakFma           12 independent 8-lane FMA chains: this core's FLOP/s limit
//   BM_StreamRead        this core's read bandwidth from memory
//   BM_PackedGemm/L/M    layout L (0 mxfp4, 1 bf16_amx, 2 bf16_vec, 3 fp8_block, 4 int8_vnni4,
//                        5 int4_vnni4 in groups of 64 with zero point 8),
//                        M tokens; the weights of 8 such projections taken in turn (more than
//                        the last-level cache), so few tokens read them from memory
// Report GFLOP/s as a fraction of BM_PeakFma's, and one token's bytes/s as a fraction of
// BM_StreamRead's.
//   MOEPACK_CPU_ISA=avx2 build/tests/bench_cpu_experts --benchmark_min_time=0.3
#include <benchmark/benchmark.h>

#include <immintrin.h>

#include <vector>

#include <tbb/task_arena.h>

#include "lib/experts/cpu_experts.h"

namespace {

using moepack::experts::CpuLayout;

constexpr uint64_t kRows = 5760, kCols = 2880, kCopies = 8;

__attribute__((target("avx2,fma"))) void BM_PeakFma(benchmark::State& state) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(0.001f);
  for (auto _ : state) {
    for (int r = 0; r < 1000; ++r)
      for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
    benchmark::DoNotOptimize(acc);
  }
  state.counters["flops"] = benchmark::Counter(1000.0 * 12 * 16, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_PeakFma);

// One core's read bandwidth from memory: a 512 MiB buffer (far beyond the last-level cache)
// summed with 8-lane loads, four independent chains.
__attribute__((target("avx2,fma"))) void BM_StreamRead(benchmark::State& state) {
  const size_t floats = size_t{128} << 20;
  std::vector<float> buffer(floats, 1.0f);
  for (auto _ : state) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < floats; i += 32) {
      a0 = _mm256_add_ps(a0, _mm256_loadu_ps(buffer.data() + i));
      a1 = _mm256_add_ps(a1, _mm256_loadu_ps(buffer.data() + i + 8));
      a2 = _mm256_add_ps(a2, _mm256_loadu_ps(buffer.data() + i + 16));
      a3 = _mm256_add_ps(a3, _mm256_loadu_ps(buffer.data() + i + 24));
    }
    __m256 sum = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    benchmark::DoNotOptimize(sum);
  }
  state.counters["bytes"] = benchmark::Counter(static_cast<double>(floats * 4), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_StreamRead)->Unit(benchmark::kMillisecond);

struct PackedBytes {
  uint64_t weight, scale, zeros = 0;
};
constexpr uint64_t kInt4Group = 64;  // divides the 2880 columns (128 does not)
PackedBytes packed_bytes(CpuLayout layout) {
  switch (layout) {
    case CpuLayout::mxfp4: return {kRows * kCols / 2, kRows * kCols / 32};
    case CpuLayout::bf16_amx:
    case CpuLayout::bf16_vec: return {kRows * kCols * 2, 0};
    case CpuLayout::fp8_block: return {kRows * kCols, 4 * ((kRows + 127) / 128) * ((kCols + 127) / 128)};
    case CpuLayout::int8_vnni4: return {kRows * (kCols + 4), 4 * kRows};
    case CpuLayout::int4_vnni4: return {kRows * (kCols / 2 + 4 * kCols / kInt4Group), 4 * kRows * (kCols / kInt4Group), kRows * (kCols / kInt4Group)};
  }
  return {0, 0};
}

void BM_PackedGemm(benchmark::State& state) {
  const auto layout = static_cast<CpuLayout>(state.range(0));
  const uint64_t m = static_cast<uint64_t>(state.range(1));
  const PackedBytes bytes = packed_bytes(layout);
  // Finite, normal values in every layout: no slow paths for NaN or subnormals.
  std::vector<uint8_t> weights(kCopies * bytes.weight);
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = layout == CpuLayout::bf16_amx || layout == CpuLayout::bf16_vec ? (i % 2 ? 0x3F : 0x80) : static_cast<uint8_t>((i * 37) & 0x57);
  std::vector<float> scales(bytes.scale / 4 + 1, 0.01f);
  std::vector<uint8_t> e8m0(bytes.scale, 120);
  const std::vector<int8_t> zeros(bytes.zeros, 8);
  std::vector<uint16_t> x(m * kCols, 0x3F80);
  std::vector<float> out(m * kRows);
  const moepack::experts::CpuIsa isa = moepack::experts::best_cpu_isa();
  tbb::task_arena one(1);
  uint64_t copy = 0;
  for (auto _ : state) {
    moepack::experts::CpuProjection p;
    p.weight = weights.data() + (copy++ % kCopies) * bytes.weight;
    p.scale = layout == CpuLayout::mxfp4 ? static_cast<const void*>(e8m0.data()) : scales.data();
    if (layout == CpuLayout::int4_vnni4) p.zeros = zeros.data(), p.groups = kCols / kInt4Group;
    one.execute([&] { moepack::experts::cpu_packed_gemm(layout, isa, p, kRows, kCols, x.data(), m, out.data()); });
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(std::string(moepack::experts::cpu_layout_name(layout)) + " " + std::string(moepack::experts::cpu_isa_name(isa)));
  state.counters["flops"] = benchmark::Counter(2.0 * static_cast<double>(m * kRows * kCols), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["bytes"] = benchmark::Counter(static_cast<double>(bytes.weight + bytes.scale + bytes.zeros), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_PackedGemm)->ArgsProduct({{0, 1, 2, 3, 4, 5}, {1, 8, 64}})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
