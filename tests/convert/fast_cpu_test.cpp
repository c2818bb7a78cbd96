// The fast CPU experts against the exact emulation of the same cpu-amx (or cpu-avx512) artifact,
// for every CPU layout they read (MXFP4, BF16 AMX and vec prepacks, FP8 block, INT8 W8A8, INT4
// W4A16 from GPTQ, AutoAWQ and compressed-tensors):
// awkward sizes (hidden and intermediate any multiple of 32, not of 64 or 128), 8 experts with
// top-2 routing, biases where the family has them, tensor-parallel ranks, thread counts (same
// bytes), and every kernel of the ISA list, each its own test (a level this machine cannot run
// is skipped with the reason).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "formats/checkpoints/checkpoint.h"
#include "lib/runtime/artifact_runtime.h"
#include "lib/runtime/bench_experts.h"
#include "lib/convert/executor.h"
#include "lib/convert/plan.h"
#include "lib/convert/target.h"
#include "lib/core/error.h"
#include "lib/experts/cpu_experts.h"
#include "lib/experts/seeded.h"
#include "lib/synth/synth.h"
#include "support/artifacts.h"
#include "support/golden_layers.h"
#include "support/test_support.h"

namespace moepack::convert {
namespace {
using runtime::ArtifactRuntime;
using runtime::BenchOptions;
using runtime::BenchReport;
using runtime::bench_experts;
using runtime::bench_has_onednn;
namespace fs = std::filesystem;

double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::fabs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return err / scale;
}

struct Case {
  std::string family;
  uint64_t hidden, intermediate;
  int tp;
  std::string target = "cpu-amx";
};

class FastCpu : public ::testing::TestWithParam<std::tuple<Case, experts::CpuIsa>> {};

TEST_P(FastCpu, AgreesWithTheEmulationAndIsThreadCountStable) {
  const auto [c, isa] = GetParam();
  if (!experts::cpu_supports(isa)) GTEST_SKIP() << experts::cpu_isa_name(isa) << " does not run here: " << experts::cpu_isa_unavailable(isa);
  test::TempDir dir;
  synth::SampleOptions so;
  so.hidden = static_cast<int>(c.hidden);
  so.intermediate = static_cast<int>(c.intermediate);
  so.experts = 8;
  so.seed = 3;
  synth::write_sample(c.family, dir.file("src"), so);
  ckpt::Checkpoint ck = ckpt::open_checkpoint(dir.file("src"));
  oracle::Deployment dep = oracle::default_deployment(oracle::parse_target(c.target));
  dep.parallel.tp = c.tp;
  ConvertRequest req;
  req.target_json = target_json(dep);
  fs::create_directories(dir.file("a"));
  execute_plan(build_conversion_plan(ck, decide_layers(ck, dep), req), dir.file("a"), ExecutorOptions{});

  ArtifactRuntime rt(dir.file("a"));
  ASSERT_TRUE(rt.has_fast_cpu(0));
  const artifact::Layer& L = rt.manifest().layers[0];
  // 45 tokens, top 2 of 8 experts: about 11 rows per expert, a partial AMX tile (the GEMM tests in
  // tests/experts/cpu_experts_test.cpp take every tile path); not a multiple of any tile.
  const uint64_t T = 45;
  std::vector<float> x = experts::seeded_normal(1, T * L.hidden_size), logits = experts::seeded_normal(2, T * L.num_experts);
  experts::Routing routing = rt.route(0, logits, T);
  const std::vector<float> exact = rt.run(0, x, routing, T);
  experts::CpuExpertsOptions one, two;
  one.threads = 1;
  two.threads = 2;
  one.isa = two.isa = isa;
  const std::vector<float> f1 = rt.run_fast_cpu(0, x, routing, T, one), f2 = rt.run_fast_cpu(0, x, routing, T, two);
  EXPECT_EQ(f1, f2) << "the same bytes for any thread count";
  EXPECT_LT(rel_error(f1, exact), 2e-2);
  EXPECT_GT(rel_error(f1, exact), 0.0) << "BF16 activations round: an exact match would mean the fast path did not run";
  // The runtime's workspace, reused by a smaller batch in between, leaves nothing behind.
  {
    const uint64_t T1 = 1;
    const std::vector<float> x1(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(T1 * L.hidden_size));
    const experts::Routing r1 = rt.route(0, std::vector<float>(logits.begin(), logits.begin() + static_cast<std::ptrdiff_t>(T1 * L.num_experts)), T1);
    const std::vector<float> small = rt.run_fast_cpu(0, x1, r1, T1, two);
    EXPECT_LT(rel_error(small, rt.run(0, x1, r1, T1)), 2e-2);
    EXPECT_EQ(small, rt.run_fast_cpu(0, x1, r1, T1, one)) << "a decode step's activation, split by columns, is thread-count stable too";
    EXPECT_EQ(rt.run_fast_cpu(0, x, routing, T, two), f1);
  }
  // The portable kernel computes the same sums up to float summation order (and, on the AVX2
  // and AVX-512F levels, scales folded into FP32 weights); a last-bit difference in a w13 output
  // can round its activation to the neighbouring BF16 value (2^-9 relative) before w2, which
  // shows as up to a few 1e-4 in the layer's output (INT4 groups at 128 x 256 TP 2: 3.6e-4).
  experts::CpuExpertsOptions portable;
  portable.isa = experts::CpuIsa::scalar;
  EXPECT_LT(rel_error(f1, rt.run_fast_cpu(0, x, routing, T, portable)), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Sizes, FastCpu,
                         ::testing::Combine(::testing::Values(Case{"gpt-oss-mxfp4", 96, 160, 1}, Case{"gpt-oss-mxfp4", 192, 192, 2}, Case{"quark-w-mxfp4", 32, 224, 1},
                                           Case{"quark-gpt-oss-w-mxfp4-a-fp8", 160, 96, 1},
                                           // BF16 (vLLM's AMX prepack): a rank's intermediate padded to 32 (224 / 2 = 112 ->
                                           // 128), biases and swigluoai on gpt-oss.
                                           Case{"mixtral-bf16", 96, 160, 1}, Case{"qwen3-moe-bf16", 160, 224, 2}, Case{"qwen3-moe-bf16", 192, 192, 2},
                                           Case{"gpt-oss-bf16", 96, 224, 1},
                                           // BF16 in the vec prepack (x86 without AMX).
                                           Case{"mixtral-bf16", 160, 96, 1, "cpu-avx512"}, Case{"gpt-oss-bf16", 96, 224, 1, "cpu-avx512"},
                                           Case{"qwen3-moe-bf16", 192, 224, 2, "cpu-avx512"},
                                           // FP8 128 x 128 blocks: hidden not a multiple of 128 (a 32-column last block).
                                           Case{"ct-fp8-block", 160, 256, 1}, Case{"ct-fp8-block", 416, 128, 1},
                                           // INT8 W8A8, VNNI-4 with the s8s8 sums between blocks.
                                           Case{"ct-w8a8-int8", 160, 96, 1}, Case{"ct-w8a8-int8", 96, 192, 2},
                                           // INT4 W4A16 in groups of 128 (the samples' group): GPTQ's stored zero points
                                           // plus 1, AutoAWQ's own, compressed-tensors' symmetric 8; a rank of TP 2.
                                           Case{"gptq-int4", 256, 128, 1}, Case{"awq-int4", 128, 256, 2}, Case{"ct-w4a16", 384, 128, 1}),
                                            ::testing::ValuesIn(experts::kCpuIsas)),
                         [](const ::testing::TestParamInfo<std::tuple<Case, experts::CpuIsa>>& i) {
                           const Case& c = std::get<0>(i.param);
                           std::string n = c.family + "_" + std::to_string(c.hidden) + "x" + std::to_string(c.intermediate) + "_tp" + std::to_string(c.tp) +
                                           (c.target == "cpu-amx" ? "" : "_" + c.target) + "_" + std::string(experts::cpu_isa_name(std::get<1>(i.param)));
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

// A whole layer at the avx512_bf16 level with the AVX-512F kernels standing in for vdpbf16ps
// (Intel's choice, CpuKernelChoice::avx512f_for_bf16) gives the avx512f level's bytes for the
// layouts with int16 decodes: experts with up to 4 tokens run the same int16 decodes (their rows
// rounded to BF16 by the level's own conversion), the others the same FP32 panels. One token,
// 8 (one or two a expert) and 45 (about 11 a expert).
TEST(FastCpuLayout, Avx512fStandingInForBf16GivesTheAvx512fLayer) {
  if (!experts::cpu_supports(experts::CpuIsa::avx512_bf16)) GTEST_SKIP() << "avx512_bf16 does not run here: " << experts::cpu_isa_unavailable(experts::CpuIsa::avx512_bf16);
  for (const char* family : {"gpt-oss-mxfp4", "ct-w8a8-int8", "gptq-int4"}) {
    SCOPED_TRACE(family);
    test::TempDir dir;
    synth::SampleOptions so;
    so.hidden = 256;  // GPTQ's groups of 128
    so.intermediate = 128;
    so.experts = 8;
    so.seed = 5;
    synth::write_sample(family, dir.file("src"), so);
    test::convert_checkpoint(dir.file("src"), "cpu-amx", dir.file("a"));
    ArtifactRuntime rt(dir.file("a"));
    const artifact::Layer& L = rt.manifest().layers[0];
    experts::CpuExpertsOptions stand_in, avx512f;
    stand_in.isa = experts::CpuIsa::avx512_bf16;
    stand_in.kernels = experts::cpu_kernel_choice(experts::CpuIsa::avx512_bf16);
    stand_in.kernels->avx512f_for_bf16 = true;
    avx512f.isa = experts::CpuIsa::avx512f;
    avx512f.kernels = experts::cpu_kernel_choice(experts::CpuIsa::avx512f);
    avx512f.kernels->vnni = stand_in.kernels->vnni;
    for (uint64_t T : {1u, 8u, 45u}) {
      const std::vector<float> x = experts::seeded_normal(3, T * L.hidden_size), logits = experts::seeded_normal(4, T * L.num_experts);
      const experts::Routing routing = rt.route(0, logits, T);
      const std::vector<float> got = rt.run_fast_cpu(0, x, routing, T, stand_in);
      EXPECT_EQ(got, rt.run_fast_cpu(0, x, routing, T, avx512f)) << T << " tokens";
      EXPECT_LT(rel_error(got, rt.run(0, x, routing, T)), 2e-2) << T << " tokens";
    }
  }
}

// The INT4 kernels subtract zero points by a table of 0..16 (every value convert writes); an
// artifact holding another is refused by tensor and element (exit 4), not computed wrongly.
TEST(FastCpuLayout, Int4ZeroPointsOutsideTheirRangeAreRefused) {
  test::TempDir dir;
  test::convert_checkpoint(test::source_dir() + "/samples/gptq-int4", "cpu-amx", dir.file("a"));
  std::string tensor;
  uint64_t bytes = 0;
  {
    ArtifactRuntime rt(dir.file("a"));
    ASSERT_TRUE(rt.has_fast_cpu(0));
    const artifact::PackedTensor& z = rt.manifest().layers[0].ranks[0].tensors.at("w2_qzeros");
    tensor = z.name;
    bytes = byte_size(DType::I8, z.shape);
  }
  std::vector<uint8_t> patched(static_cast<size_t>(bytes), 8);
  patched[5] = 17;
  test::golden::patch_tensor(dir.file("a"), tensor, patched);
  ArtifactRuntime rt(dir.file("a"));
  const artifact::Layer& L = rt.manifest().layers[0];
  const uint64_t T = 2;
  const std::vector<float> x = experts::seeded_normal(1, T * L.hidden_size);
  const experts::Routing routing = rt.route(0, experts::seeded_normal(2, T * L.num_experts), T);
  try {
    rt.run_fast_cpu(0, x, routing, T, experts::CpuExpertsOptions{});
    ADD_FAILURE() << "a zero point of 17 ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::bad_input);
    EXPECT_NE(std::string(e.what()).find(tensor), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("zero point 17 at element 5 is outside 0..16"), std::string::npos) << e.what();
  }
}

TEST(FastCpuLayout, OtherLayoutsAreNotRunByTheFastKernels) {
  test::TempDir dir;
  ckpt::Checkpoint ck = ckpt::open_checkpoint(test::source_dir() + "/samples/gpt-oss-mxfp4");
  oracle::Deployment dep = oracle::default_deployment(oracle::parse_target("sm90"));
  ConvertRequest req;
  req.target_json = target_json(dep);
  fs::create_directories(dir.file("a"));
  execute_plan(build_conversion_plan(ck, decide_layers(ck, dep), req), dir.file("a"), ExecutorOptions{});
  ArtifactRuntime rt(dir.file("a"));
  EXPECT_FALSE(rt.has_fast_cpu(0));
}

// The benchmark's report: every figure present and consistent (no timing is asserted).
TEST(BenchExperts, ReportsEveryTokenCountWithTheMachinesLimits) {
  test::TempDir dir;
  ckpt::Checkpoint ck = ckpt::open_checkpoint(test::source_dir() + "/samples/gpt-oss-mxfp4");
  oracle::Deployment dep = oracle::default_deployment(oracle::parse_target("cpu-amx"));
  ConvertRequest req;
  req.target_json = target_json(dep);
  fs::create_directories(dir.file("a"));
  execute_plan(build_conversion_plan(ck, decide_layers(ck, dep), req), dir.file("a"), ExecutorOptions{});
  BenchOptions o;
  o.artifact = dir.file("a");
  o.tokens = {1, 3};
  o.threads = 1;
  o.min_seconds = 0.0;
  BenchReport r = bench_experts(o);
  EXPECT_GT(r.stream_read_gbps, 0.0);
  EXPECT_EQ(r.num_experts, 4u);
  EXPECT_EQ(r.layout, "cpu.sgl_convert_weight_packed(mxfp4)");
  ASSERT_EQ(r.results.size(), 2u);
  for (const auto& x : r.results) {
    EXPECT_GT(x.ms, 0.0);
    EXPECT_GT(x.weight_bytes, 0u);
    EXPECT_GT(x.gflops, 0.0);
    // The sample's 4 experts fit any cache: the runs took turns until every expert was routed.
    EXPECT_GE(x.routings, 1u);
    EXPECT_GE(x.rotation_bytes, x.weight_bytes);
    EXPECT_LE(x.routings, 64u);
    // oneDNN runs f32 everywhere; bf16 only where it has an implementation (AVX-512 and up).
    EXPECT_EQ(x.onednn.f32_gflops.has_value(), bench_has_onednn());
    EXPECT_EQ(x.ratio_to_onednn.has_value(), bench_has_onednn());
    if (bench_has_onednn()) {
      // The peer is the faster dtype, and the ratio is taken to it.
      const double bf16 = x.onednn.bf16_gflops.value_or(0), peer = std::max(*x.onednn.f32_gflops, bf16);
      EXPECT_EQ(x.onednn.peer_dtype(), bf16 > *x.onednn.f32_gflops ? "bf16" : "f32");
      EXPECT_DOUBLE_EQ(*x.ratio_to_onednn, x.gflops / peer);
    }
  }
  EXPECT_EQ(r.threads, 1) << "--threads wins";
  EXPECT_GE(r.allowed_cpus, 1);
  // The machine's peer runs one expert's GEMMs at the rows an expert gets in a 512-token batch.
  EXPECT_EQ(r.onednn_rows, (512 * r.top_k + r.num_experts - 1) / r.num_experts);
  EXPECT_EQ(r.onednn.peer_dtype().empty(), !bench_has_onednn());
  // One token reads its top-2 experts; three tokens read at least as many.
  EXPECT_LE(r.results[0].weight_bytes, r.results[1].weight_bytes);
  test::TempDir gpu;
  fs::create_directories(gpu.file("a"));
  execute_plan(build_conversion_plan(ck, decide_layers(ck, oracle::default_deployment(oracle::parse_target("sm90"))), req), gpu.file("a"), ExecutorOptions{});
  o.artifact = gpu.file("a");
  EXPECT_THROW(bench_experts(o), Error) << "GPU layouts are proven by emulation, not benchmarked";
}

}  // namespace
}  // namespace moepack::convert
