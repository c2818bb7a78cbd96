// Benchmark (not a test): what the manifest's XXH3-128 costs next to the copy it rides on.
// convert hashes every byte it writes and every source byte it reads, in pieces that are still in
// the cache (moepack-convert(1)); this measures one such piece three ways on this machine:
//   BM_Copy         memcpy of the piece (the floor of any pass-through)
//   BM_Hash         XXH3-128 streaming over the piece
//   BM_CopyAndHash  both, as convert does them
// and, for scale, the same over a buffer far larger than the caches (the DRAM-bound case of a
// real checkpoint). Report bytes/s ratios, not absolute numbers: the machine is shared.
//   build/tests/bench_hash_vs_copy --benchmark_min_time=0.5s
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "lib/core/hash.h"

namespace {

std::vector<uint8_t> filled(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 131 + (i >> 9));
  return v;
}

void BM_Copy(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> src = filled(n), dst(n);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n));
}

void BM_Hash(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> src = filled(n);
  for (auto _ : state) {
    moepack::Xxh3Stream h;
    h.update(src);
    benchmark::DoNotOptimize(h.hex());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n));
}

void BM_CopyAndHash(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> src = filled(n), dst(n);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n);
    moepack::Xxh3Stream h;
    h.update(dst);
    benchmark::DoNotOptimize(h.hex());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(n));
}

// 1 MiB: the pipeline's piece (in L2); 256 MiB: far beyond the caches.
BENCHMARK(BM_Copy)->Arg(1 << 20)->Arg(256 << 20);
BENCHMARK(BM_Hash)->Arg(1 << 20)->Arg(256 << 20);
BENCHMARK(BM_CopyAndHash)->Arg(1 << 20)->Arg(256 << 20);

}  // namespace

BENCHMARK_MAIN();
