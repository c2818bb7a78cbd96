// Every MXFP4 sample converted for every device (and flag set) that gets a distinct layout,
// each artifact proven against its source: manifest hashes, and every packed tensor unpacked
// through its layout's inverse equals the source expert as vLLM's loader holds it.
#include <gtest/gtest.h>

#include <filesystem>

#include "formats/artifact/manifest.h"
#include "formats/checkpoints/checkpoint.h"
#include "lib/runtime/artifact_check.h"
#include "lib/convert/executor.h"
#include "lib/convert/plan.h"
#include "lib/convert/target.h"
#include "lib/runtime/verify.h"
#include "lib/core/error.h"
#include "support/artifacts.h"
#include "support/test_support.h"

namespace moepack::convert {
namespace {
using runtime::ArtifactCheck;
using runtime::VerifyReport;
namespace fs = std::filesystem;

struct Case {
  std::string sample;
  std::string target;
  std::vector<std::string> flags;  // extra deployment flags as NAME=VALUE pairs for the options struct
  std::string expected_backend;    // "" = refused (exit 3)
  std::string expected_class = "";  // checked when given
};

oracle::Deployment deployment_for(const Case& c) {
  oracle::Deployment d = oracle::default_deployment(oracle::parse_target(c.target));
  for (const auto& f : c.flags) {
    auto eq = f.find('=');
    std::string k = f.substr(0, eq), v = f.substr(eq + 1);
    if (k == "tp") d.parallel.tp = std::stoi(v);
    else if (k == "moe-backend") d.moe_backend = oracle::normalize_moe_backend(v);
    else if (k == "activation") d.moe_activation = v;
    else if (k == "env") d.env.set(v.substr(0, v.find(':')), v.substr(v.find(':') + 1));
    else if (k == "dtype") d.model_dtype = *oracle::parse_float_type(v);
    else if (k == "ep") d.parallel.enable_expert_parallel = v == "1";
    else if (k == "eplb") d.parallel.enable_eplb = v == "1";
    else if (k == "dp") d.parallel.dp = std::stoi(v);
    else if (k == "all2all") d.parallel.all2all_backend = v;
    else if (k == "model-activation") continue;  // applied to the checkpoint's facts (convert_and_check)
    // No --target names these: `host` on a POWER machine, `host` on a Mac.
    else if (k == "cpu-arch" && v == "powerpc") d.device.cpu_arch = oracle::CpuArch::powerpc;
    else if (k == "darwin") d.device.darwin = v == "1";
    else throw std::runtime_error("unknown test flag " + k);
  }
  return d;
}

std::string sample(const std::string& name) { return test::source_dir() + "/samples/" + name; }

void convert_and_check(const Case& c) {
  SCOPED_TRACE(c.sample + " on " + c.target);
  oracle::Deployment dep = deployment_for(c);
  ckpt::Checkpoint ck = ckpt::open_checkpoint(sample(c.sample));
  // The samples are small Qwen3/gpt-oss models; a backend that needs another model activation
  // (AITER W4A8 takes swigluoai only) is reached by overriding the reader's fact.
  for (const auto& f : c.flags)
    if (f.rfind("model-activation=", 0) == 0) ck.facts.activation = f.substr(f.find('=') + 1);
  auto decisions = decide_layers(ck, dep);
  ASSERT_FALSE(decisions.empty());
  ConvertRequest req;
  req.target_json = target_json(dep);
  if (c.expected_backend.empty()) {
    try {
      build_conversion_plan(ck, decisions, req);
      ADD_FAILURE() << "expected a refusal";
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 3) << e.what();
    }
    return;
  }
  EXPECT_EQ(decisions[0].decision.backend.value_or("(refused)"), c.expected_backend);
  if (!c.expected_class.empty()) {
    EXPECT_EQ(decisions[0].decision.experts_class.value_or("(none)"), c.expected_class);
  }
  ConversionPlan plan = build_conversion_plan(ck, decisions, req);
  test::TempDir out;
  artifact::Manifest m = execute_plan(plan, out.path(), ExecutorOptions{});
  ASSERT_EQ(m.layers.size(), ck.layers.size());
  // Nothing the loader holds is dropped: every canonical param of every layer is written on
  // every rank (the source's expert tensors themselves are not passed through).
  for (const auto& layer : m.layers) {
    const ckpt::MoeLayer* source_layer = ck.find_layer(layer.prefix);
    ASSERT_NE(source_layer, nullptr);
    for (const auto& rank : layer.ranks)
      for (const auto& p : source_layer->params) {
        // compressed-tensors NVFP4 params carry vLLM's names after loading; Marlin drops NVFP4's
        // input scales (convert_to_nvfp4_moe_kernel_format sets them to None).
        std::string held = p.name;
        for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{{"_weight_packed", "_weight"},
                                                                                      {"_weight_global_scale", "_weight_scale_2"},
                                                                                      {"_input_global_scale", "_input_scale"}})
          if (layer.family == "nvfp4" && held.ends_with(from)) held = held.substr(0, held.size() - from.size()) + to;
        if (layer.family == "nvfp4" && layer.backend == "MARLIN" && held.ends_with("_input_scale")) continue;
        EXPECT_TRUE(rank.tensors.count(held)) << layer.prefix << " rank " << rank.rank << " lacks " << held;
      }
  }
  // Proven against the checkpoint as this test holds it (with any fact it changed), which the
  // manifest must describe exactly.
  ArtifactCheck check = test::expect_checked_against_source(out.path(), ck);
  EXPECT_EQ(check.files_checked, m.files.size());
  // And run: the runtime experts on the packed layout against the source's reference.
  VerifyReport v = test::expect_verified_against_source(out.path(), sample(c.sample), 4, &ck);
  ASSERT_EQ(v.layers.size(), ck.layers.size());
}

class ConvertSamples : public ::testing::TestWithParam<Case> {};

// A test name from the sample, target and flags (letters and digits kept, the rest '_').
std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string n = info.param.sample + "_" + info.param.target;
  for (const auto& f : info.param.flags) n += "_" + f;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}
TEST_P(ConvertSamples, ArtifactIsProvenAgainstItsSource) { convert_and_check(GetParam()); }

// One row per distinct layout path of oracle/mxfp4.py (gpt-oss converter, generic converter,
// compressed-tensors' own path) and device generation.
INSTANTIATE_TEST_SUITE_P(
    Mxfp4, ConvertSamples,
    ::testing::Values(
        // gpt-oss converter (GptOssMxfp4MoEMethod)
        Case{"gpt-oss-mxfp4", "sm90", {}, "TRITON"},
        Case{"gpt-oss-mxfp4", "sm100", {}, "FLASHINFER_TRTLLM_MXFP4_BF16"},
        Case{"gpt-oss-mxfp4", "sm100", {"moe-backend=triton"}, "TRITON"},
        Case{"gpt-oss-mxfp4", "sm100", {"moe-backend=flashinfer_cutlass", "activation=mxfp8"}, "FLASHINFER_CUTLASS_MXFP4_MXFP8"},
        Case{"gpt-oss-mxfp4", "sm100", {"moe-backend=flashinfer_cutlass"}, ""},  // BF16 CUTLASS is SM90 only
        Case{"gpt-oss-mxfp4", "sm90", {"moe-backend=flashinfer_cutlass"}, "FLASHINFER_CUTLASS_MXFP4_BF16"},
        Case{"gpt-oss-mxfp4", "sm90", {"moe-backend=marlin"}, "MARLIN"},
        Case{"gpt-oss-mxfp4", "sm80", {}, "MARLIN"},
        Case{"gpt-oss-mxfp4", "gfx950", {}, "TRITON"},
        Case{"gpt-oss-mxfp4", "gfx942", {}, "TRITON"},
        Case{"gpt-oss-mxfp4", "cpu-amx", {}, "CPU"},
        Case{"gpt-oss-mxfp4", "sm90", {"tp=2"}, "TRITON"},
        Case{"gpt-oss-mxfp4", "sm100", {"tp=2"}, "FLASHINFER_TRTLLM_MXFP4_BF16"},
        Case{"gpt-oss-mxfp4", "sm90", {"moe-backend=flashinfer_trtllm"}, ""},  // explicit and unsupported: refused
        Case{"gpt-oss-mxfp4", "gfx950", {"env=VLLM_ROCM_USE_AITER:1"}, "AITER_MXFP4_BF16"},
        // Quark OCP-MX (QuarkOCP_MX_MoEMethod, gpt-oss converter, [w1; w3] rows)
        Case{"quark-w-mxfp4", "gfx950", {}, "EMULATION"},
        Case{"quark-w-mxfp4", "sm90", {}, "FLASHINFER_CUTLASS_MXFP4_BF16"},
        Case{"quark-w-mxfp4", "sm90", {"moe-backend=triton"}, ""},
        Case{"quark-w-mxfp4", "cpu-amx", {"tp=2"}, "CPU"},  // per-expert source, AMX packing, one index per rank
        Case{"quark-w-mxfp4-a-mxfp4", "gfx950", {"env=VLLM_ROCM_USE_AITER:1"}, "AITER_MXFP4_MXFP4"},
        Case{"quark-w-mxfp4-a-fp8", "gfx950", {}, "EMULATION"},  // OAI Triton takes swigluoai only, this is silu
        // amd-quark gpt-oss export: per-expert gate_up_proj kept interleaved, static FP8 inputs
        // (gpt-oss loader slicing of interleaved rows; swigluoai reaches AITER W4A8 as it is).
        Case{"quark-gpt-oss-w-mxfp4-a-fp8", "gfx950", {}, "EMULATION"},
        Case{"quark-gpt-oss-w-mxfp4-a-fp8", "gfx950", {"env=VLLM_ROCM_USE_AITER:1"}, "AITER_MXFP4_FP8"},
        Case{"quark-gpt-oss-w-mxfp4-a-fp8", "gfx1250", {"env=VLLM_ROCM_USE_AITER:1"}, "AITER_MXFP4_FP8"},
        Case{"quark-gpt-oss-w-mxfp4-a-fp8", "cpu-amx", {}, "CPU"},
        Case{"quark-gpt-oss-w-mxfp4-a-fp8", "gfx950", {"tp=2"}, "EMULATION"},
        Case{"quark-gpt-oss-w-mxfp4-a-fp8", "gfx950", {"env=VLLM_ROCM_USE_AITER:1", "tp=2"}, "AITER_MXFP4_FP8"},
        Case{"quark-gpt-oss-w-mxfp4-a-fp8", "sm90", {"moe-backend=marlin"}, ""},  // Marlin takes no FP8 activations
        // Quark MXFP6 (no selector: EMULATION; FP6 packs 4 elements in 3 bytes)
        Case{"quark-w-mxfp6-e3m2", "gfx950", {}, "EMULATION"},
        Case{"quark-w-mxfp6-e3m2", "sm90", {"tp=2"}, "EMULATION"},
        Case{"quark-w-mxfp4-a-fp8", "gfx950", {"env=VLLM_ROCM_USE_AITER:1", "model-activation=swigluoai"}, "AITER_MXFP4_FP8"},
        Case{"quark-w-mxfp4-a-fp8", "gfx1250", {"env=VLLM_ROCM_USE_AITER:1", "model-activation=swigluoai"}, "AITER_MXFP4_FP8"},
        // compressed-tensors MXFP4 (its own path: Marlin, CUTLASS W4A4 on SM100)
        Case{"ct-mxfp4", "sm90", {}, "MARLIN"},
        Case{"ct-mxfp4", "sm100", {}, "MARLIN"},
        // llm-compressor's gpt-oss (per-expert, a bias per projection): vLLM's gpt-oss model
        // loads compressed-tensors with _load_weights_other, which reads fused experts only and
        // raises on these (golden_mxfp4_layers' raising case), on every target.
        Case{"ct-gpt-oss-mxfp4", "sm90", {}, ""}, Case{"ct-gpt-oss-mxfp4", "xpu", {}, ""},
        // gpt-oss' loaders keep w2_bias on TP rank 0 only (the TP 2 gpt-oss-mxfp4 case above on
        // Triton, and here on Marlin): summed over the ranks the bias counts once, which verify checks.
        Case{"gpt-oss-mxfp4", "sm80", {"tp=2"}, "MARLIN"},
        // TP 2 leaves K/32 = 2 scale groups per row of w2: the CUTLASS W4A4 swizzle cannot take it.
        Case{"ct-mxfp4", "sm100", {"tp=2"}, ""},
        // TP 8 leaves 16 intermediate elements per rank: half an MX scale block.
        Case{"ct-mxfp4", "xpu", {"tp=8"}, ""},
        // DeepSeek-V4 MXFP4 (Mxfp4MoEMethod, generic converter)
        Case{"deepseek-v4-mxfp4", "sm90", {}, "MARLIN"},
        Case{"deepseek-v4-mxfp4", "sm90", {"moe-backend=triton"}, ""},
        Case{"deepseek-v4-mxfp4", "sm100", {"moe-backend=marlin"}, "MARLIN"},
        Case{"deepseek-v4-mxfp4", "sm100", {}, "FLASHINFER_TRTLLM_MXFP4_MXFP8"},
        Case{"deepseek-v4-mxfp4", "sm100", {"moe-backend=deep_gemm"}, "DEEPGEMM_MXFP4"},
        Case{"deepseek-v4-mxfp4", "sm90", {"moe-backend=flashinfer_cutlass"}, "FLASHINFER_CUTLASS_MXFP4_BF16"},
        Case{"deepseek-v4-mxfp4", "cpu-amx", {}, ""},
        Case{"deepseek-v4-mxfp4", "gfx950", {"env=VLLM_ROCM_USE_AITER:1"}, "AITER_MXFP4_BF16"}),  // the generic converter has no CPU branch
    case_name);

// Every NVFP4 source on every backend with its own layout (oracle/nvfp4.py), at TP 1 and 2.
INSTANTIATE_TEST_SUITE_P(
    Nvfp4, ConvertSamples,
    ::testing::Values(Case{"modelopt-nvfp4", "sm100", {}, "FLASHINFER_TRTLLM"}, Case{"modelopt-nvfp4", "sm100", {"tp=2"}, "FLASHINFER_TRTLLM"},
                      Case{"modelopt-nvfp4", "sm100", {"tp=4"}, ""},  // TRT-LLM's end padding of [w3; w1] would mix halves
                      Case{"modelopt-nvfp4", "sm120", {}, "FLASHINFER_CUTLASS"}, Case{"modelopt-nvfp4", "sm110", {}, "VLLM_CUTLASS"},
                      Case{"modelopt-nvfp4", "sm90", {}, "MARLIN"}, Case{"modelopt-nvfp4", "sm90", {"env=VLLM_MARLIN_INPUT_DTYPE:fp8"}, ""},
                      Case{"modelopt-nvfp4", "sm100", {"moe-backend=flashinfer_cutedsl"}, "FLASHINFER_CUTEDSL"},
                      Case{"modelopt-nvfp4", "sm120", {"moe-backend=flashinfer_b12x"}, "FLASHINFER_B12X"},
                      Case{"modelopt-nvfp4", "sm100", {"moe-backend=emulation"}, "EMULATION"},
                      Case{"modelopt-nvfp4", "sm120", {"moe-backend=b12x"}, ""},  // prepared by the external b12x package
                      Case{"ct-nvfp4", "sm100", {}, "FLASHINFER_TRTLLM"}, Case{"ct-nvfp4", "sm120", {"tp=2"}, "FLASHINFER_CUTLASS"},
                      Case{"ct-nvfp4", "sm110", {}, "VLLM_CUTLASS"}, Case{"ct-nvfp4", "sm90", {}, "MARLIN"},
                      Case{"ct-nvfp4a16", "sm90", {}, "MARLIN"}, Case{"ct-nvfp4a16", "sm120", {"moe-backend=flashinfer_b12x"}, "FLASHINFER_B12X"},
                      Case{"modelopt-w4a16-nvfp4", "sm100", {"tp=2"}, "MARLIN"},
                      Case{"nemotron-h-nvfp4", "sm100", {}, "FLASHINFER_TRTLLM"}, Case{"nemotron-h-nvfp4", "sm120", {}, "FLASHINFER_CUTLASS"},
                      Case{"nemotron-h-nvfp4", "sm90", {}, "MARLIN"}, Case{"nemotron-h-nvfp4", "sm100", {"moe-backend=flashinfer_cutedsl"}, "FLASHINFER_CUTEDSL"},
                      Case{"deepseek-v4-nvfp4", "sm100", {}, "FLASHINFER_TRTLLM"}, Case{"deepseek-v4-nvfp4", "sm100", {"tp=2"}, "FLASHINFER_TRTLLM"},
                      Case{"deepseek-v4-nvfp4", "sm110", {}, "VLLM_CUTLASS"}),
    case_name);

// The unquantized family: per-expert BF16 (Mixtral, Qwen3) and fused 3-D BF16 with interleaved
// gate/up and biases (gpt-oss, SWIGLUOAI: no CPU intermediate padding, FlashInfer moved back).
INSTANTIATE_TEST_SUITE_P(
    Unquantized, ConvertSamples,
    ::testing::Values(
        Case{"mixtral-bf16", "cpu-amx", {}, "CPU"},         // vllm.cpu_prepack_moe_weight(amx)
        Case{"mixtral-bf16", "cpu-avx512", {}, "CPU"},      // (vec)
        Case{"mixtral-bf16", "sm90", {}, "TRITON"},         // checkpoint layout
        Case{"mixtral-bf16", "sm100", {}, "FLASHINFER_TRTLLM"},  // BlockMajorK, w3/w1 rows
        Case{"mixtral-bf16", "sm120", {}, "FLASHINFER_CUTLASS"},  // [w3; w1]
        Case{"mixtral-bf16", "xpu", {}, "XPU"},             // transposed
        Case{"mixtral-bf16", "gfx942", {}, "TRITON"},
        Case{"mixtral-bf16", "sm100", {"tp=2"}, "FLASHINFER_TRTLLM"},  // I = 64 per rank: the smallest it takes
        Case{"mixtral-bf16", "sm100", {"tp=4"}, ""},         // I = 32 per rank: I % 64 != 0, vLLM fails at load
        Case{"mixtral-bf16", "sm100", {"dtype=fp16"}, ""},   // vLLM would cast the BF16 experts
        Case{"qwen3-moe-bf16", "cpu-amx", {"tp=4"}, "CPU"},
        Case{"qwen3-moe-bf16", "cpu-amx", {"tp=2", "ep=1"}, ""},  // vLLM's CPU experts ignore expert_map
        Case{"qwen3-moe-bf16", "cpu-avx512", {"tp=8"}, "CPU"},  // I = 16 per rank, zero-padded to 32 per w13 half
        Case{"qwen3-moe-bf16", "sm120", {"tp=2"}, "FLASHINFER_CUTLASS"},
        Case{"qwen3-moe-bf16", "sm100", {"moe-backend=triton"}, "TRITON"},
        Case{"qwen3-moe-bf16", "xpu", {"tp=2"}, "XPU"},
        // Arm (ArmCPUUnquantizedExperts): cpu_prepack_moe_weight(neon), intermediate padded to 32
        Case{"qwen3-moe-bf16", "cpu-arm", {}, "CPU", "ArmCPUUnquantizedExperts"},
        Case{"qwen3-moe-bf16", "cpu-arm", {"tp=2"}, "CPU", "ArmCPUUnquantizedExperts"},
        Case{"qwen3-moe-bf16", "cpu-arm", {"tp=8"}, "CPU", "ArmCPUUnquantizedExperts"},  // I = 16 per rank, padded to 32 per w13 half
        Case{"mixtral-bf16", "cpu-arm", {}, "CPU", "ArmCPUUnquantizedExperts"},
        Case{"mixtral-bf16", "cpu-arm", {"tp=2"}, "CPU", "ArmCPUUnquantizedExperts"},
        Case{"gpt-oss-bf16", "cpu-arm", {}, "CPU", "ArmCPUUnquantizedExperts"},        // biases, SWIGLUOAI (no padding)
        Case{"gpt-oss-bf16", "cpu-arm", {"tp=2"}, "CPU", "ArmCPUUnquantizedExperts"},
        Case{"qwen3-moe-bf16", "cpu-arm", {"tp=2", "ep=1"}, ""},  // vLLM's CPU experts ignore expert_map
        Case{"qwen3-moe-bf16", "cpu-arm", {"darwin=1"}, "CPU", "CPUUnquantizedExperts"},  // a Mac: vec
        // POWER (PowerCPUUnquantizedExperts, `host` there): cpu_prepack_moe_weight(vsx), padded to 16
        Case{"qwen3-moe-bf16", "cpu-avx512", {"cpu-arch=powerpc"}, "CPU", "PowerCPUUnquantizedExperts"},
        Case{"qwen3-moe-bf16", "cpu-avx512", {"cpu-arch=powerpc", "tp=8"}, "CPU", "PowerCPUUnquantizedExperts"},
        Case{"mixtral-bf16", "cpu-avx512", {"cpu-arch=powerpc", "tp=2"}, "CPU", "PowerCPUUnquantizedExperts"},
        Case{"gpt-oss-bf16", "cpu-avx512", {"cpu-arch=powerpc", "tp=2"}, "CPU", "PowerCPUUnquantizedExperts"},
        Case{"qwen3-moe-bf16", "gfx942", {"env=VLLM_ROCM_USE_AITER:1"}, "AITER"},  // shuffle_weight, 8-element runs
        Case{"mixtral-bf16", "gfx950", {"env=VLLM_ROCM_USE_AITER:1", "tp=2"}, "AITER"},
        Case{"gpt-oss-bf16", "cpu-amx", {}, "CPU"},
        Case{"gpt-oss-bf16", "cpu-avx512", {}, "CPU"},
        Case{"gpt-oss-bf16", "sm90", {}, "TRITON"},
        Case{"gpt-oss-bf16", "sm100", {}, "TRITON"},
        Case{"gpt-oss-bf16", "xpu", {}, "XPU"},
        Case{"gpt-oss-bf16", "gfx950", {"tp=2"}, "TRITON"}),
    case_name);

// The WNA16 family on Marlin: GPTQ (with and without act-order, 4 and 8 bit), AutoAWQ and
// compressed-tensors (symmetric, asymmetric, act-order, 8 bit); the loader casts the fp16
// checkpoint scales to the model dtype. At TP 2 these samples' 64 rows per rank are below the
// group size, so the oracle moves to HUMMING or TRITON, whose preparation is not reproduced.
INSTANTIATE_TEST_SUITE_P(
    Wna16, ConvertSamples,
    ::testing::Values(Case{"gptq-int4", "sm90", {}, "MARLIN"}, Case{"gptq-int4", "sm80", {"dtype=fp16"}, "MARLIN"},
                      Case{"gptq-int4-desc-act", "sm90", {}, "MARLIN"}, Case{"gptq-int4-desc-act", "sm120", {}, "MARLIN"},
                      Case{"gptq-int8", "sm89", {}, "MARLIN"}, Case{"awq-int4", "sm90", {}, "MARLIN"},
                      Case{"ct-w4a16", "sm100", {}, "MARLIN"}, Case{"ct-w4a16-asym", "sm90", {}, "MARLIN"},
                      Case{"ct-w4a16-actorder", "sm90", {"dtype=fp16"}, "MARLIN"}, Case{"ct-w8a16", "sm90", {"tp=2"}, "MARLIN"},
                      Case{"gptq-int4", "sm90", {"tp=2"}, ""},          // HUMMING: the external humming package prepares it
                      // One zero-point group along K: vLLM's uint8 view of the transposed zero points raises
                      Case{"ct-w4a16-asym", "sm90", {"moe-backend=triton"}, ""},
                      Case{"ct-w4a16-asym", "sm90", {"tp=2"}, ""},  // 64 rows per rank split a group of 128: vLLM's ValueError
                      Case{"ct-w4a16", "sm90", {"moe-backend=triton"}, "TRITON"},
                      Case{"ct-w8a16", "sm90", {"moe-backend=triton"}, ""},  // channel-wise off Marlin: CompressedTensorsWNA16MoEMethod's assert
                      Case{"gptq-int4", "sm89", {"env=VLLM_MARLIN_INPUT_DTYPE:fp8"}, ""}),
    case_name);

// The WNA16 family on the x86 CPU with AMX (CPUExpertsInt4): sgl-kernel's
// convert_weight_packed_scale_zp (GPTQ / compressed-tensors unpacking with zero points + 1, AutoAWQ
// unpacking, compressed-tensors symmetric with vLLM's synthetic 0x77777777 zero points); g_idx kept.
// Refused as vLLM refuses: asymmetric compressed-tensors and int8 weights (CPUExpertsInt4 takes
// kInt4Static only), GPTQ desc_act (_process_weights_cpu's NotImplementedError), compressed-tensors
// actorder group (the method's assert off Marlin), no AMX; and the 64 rows per rank of TP 2 that
// split a group of 128.
INSTANTIATE_TEST_SUITE_P(
    Wna16Cpu, ConvertSamples,
    ::testing::Values(Case{"gptq-int4", "cpu-amx", {}, "CPU"}, Case{"gptq-int4", "cpu-amx", {"dtype=fp16"}, "CPU"},
                      Case{"awq-int4", "cpu-amx", {}, "CPU"}, Case{"ct-w4a16", "cpu-amx", {}, "CPU"},
                      Case{"ct-w4a16-asym", "cpu-amx", {}, ""}, Case{"gptq-int4-desc-act", "cpu-amx", {}, ""},
                      Case{"ct-w4a16-actorder", "cpu-amx", {}, ""}, Case{"gptq-int8", "cpu-amx", {}, ""},
                      Case{"ct-w8a16", "cpu-amx", {}, ""}, Case{"gptq-int4", "cpu-avx512", {}, ""},
                      Case{"awq-int4", "cpu-amx", {"tp=2"}, ""}),
    case_name);

// The FP8 family on the backends that take the checkpoint bytes after the FP8 methods' own steps
// (per-tensor w13 requantized to the larger shard scale, fp32 scales, input-scale maxima).
INSTANTIATE_TEST_SUITE_P(
    Fp8, ConvertSamples,
    ::testing::Values(Case{"ct-fp8-tensor", "sm89", {}, "TRITON"}, Case{"ct-fp8-tensor", "sm89", {"tp=2", "ep=1"}, "TRITON"},
                      Case{"ct-fp8-tensor", "sm90", {"moe-backend=cutlass"}, "VLLM_CUTLASS"},
                      Case{"ct-fp8-tensor", "sm89", {"tp=2", "ep=1", "eplb=1"}, "TRITON"},  // input-scale max over every expert
                      Case{"ct-fp8-channel", "sm89", {"tp=2"}, "TRITON"}, Case{"ct-fp8-channel", "sm90", {}, "VLLM_CUTLASS"},
                      Case{"ct-fp8-block", "sm89", {}, "TRITON"}, Case{"ct-fp8-block", "sm89", {"tp=2", "ep=1"}, "TRITON"},
                      Case{"deepseek-v3-fp8", "sm90", {}, "TRITON"}, Case{"modelopt-fp8", "sm89", {"tp=2"}, "TRITON"},
                      Case{"llama4-fp8", "sm89", {}, "TRITON"},
                      Case{"ct-fp8-block", "sm89", {"tp=2"}, ""},     // 64 rows per rank: vLLM's block_n ValueError
                      Case{"ct-fp8-tensor", "sm90", {}, "FLASHINFER_CUTLASS"},         // requantized, [w3; w1]
                      Case{"modelopt-fp8", "sm100", {}, "FLASHINFER_TRTLLM"},          // + interleave, shuffle_matrix_a
                      Case{"modelopt-fp8", "sm100", {"tp=2"}, "FLASHINFER_TRTLLM"},
                      Case{"llama4-fp8", "sm90", {"tp=2"}, "FLASHINFER_CUTLASS"},
                      Case{"deepseek-v3-fp8", "sm90", {"tp=2", "ep=1"}, "FLASHINFER_CUTLASS"},  // block: swap, clamp 1e-10
                      Case{"ct-fp8-block", "sm90", {"moe-backend=flashinfer_cutlass"}, "FLASHINFER_CUTLASS"},
                      Case{"deepseek-v3-fp8", "sm100", {}, "FLASHINFER_TRTLLM"},       // [w3; w1], 16-row shuffle, BlockMajorK
                      Case{"ct-fp8-block", "sm100", {"tp=2", "ep=1"}, "FLASHINFER_TRTLLM"},
                      // DeepGEMM: E8M0 (the default) requantizes to power-of-two block scales; SM90 keeps the fp32 grid
                      Case{"deepseek-v3-fp8", "sm90", {"moe-backend=deep_gemm"}, "DEEPGEMM"},
                      Case{"ct-fp8-block", "sm90", {"moe-backend=deep_gemm"}, "DEEPGEMM"},
                      Case{"deepseek-v3-fp8", "sm90", {"moe-backend=deep_gemm", "dp=2", "ep=1", "all2all=deepep_low_latency"}, ""},  // hidden 128 -> 2048: block scales of a padded hidden size not reproduced
                      Case{"deepseek-v3-fp8", "sm100", {"moe-backend=deep_gemm", "env=VLLM_USE_DEEP_GEMM_E8M0:0"}, "DEEPGEMM"},  // fp32, unchanged
                      Case{"deepseek-v3-fp8", "sm100", {"moe-backend=deep_gemm"}, "DEEPGEMM"},  // rows broadcast, packed UE8M0 scales
                      Case{"deepseek-v3-fp8", "sm120", {"moe-backend=deep_gemm"}, ""},  // DeepGEMM: DG_HOST_UNREACHABLE
                      // MI300: normalize_e4m3fn_to_e4m3fnuz (F8_E4M3FNUZ, 0x80 -> 0, scales x 2), then the
                      // per-tensor w13 requantization in FNUZ (bound 224); ModelOpt does not normalize: refused
                      Case{"ct-fp8-tensor", "gfx942", {}, "TRITON"}, Case{"ct-fp8-tensor", "gfx942", {"tp=2", "ep=1"}, "TRITON"},
                      Case{"ct-fp8-channel", "gfx942", {"tp=2"}, "TRITON"}, Case{"deepseek-v3-fp8", "gfx942", {}, "TRITON"},
                      Case{"modelopt-fp8", "gfx942", {}, ""},
                      Case{"ct-fp8-block", "cpu-amx", {}, "CPU"},     // sgl convert_weight_packed (VNNI-2)
                      Case{"ct-fp8-tensor", "sm80", {}, "MARLIN"},      // int32 view + 8-bit repack, biased channel-wise scales
                      Case{"ct-fp8-channel", "sm80", {"tp=2"}, "MARLIN"}, Case{"deepseek-v3-fp8", "sm80", {}, "MARLIN"},
                      Case{"modelopt-fp8", "sm86", {"dtype=fp16"}, "MARLIN"}, Case{"ct-fp8-block", "sm80", {"tp=2", "ep=1"}, "MARLIN"},
                      Case{"llama4-fp8", "sm80", {"tp=2"}, "MARLIN"},
                      Case{"ct-fp8-tensor", "sm80", {"env=VLLM_MARLIN_INPUT_DTYPE:fp8"}, ""},  // "Marlin W8A8 is not supported"
                      Case{"ct-fp8-channel", "cpu-amx", {}, ""},      // NONE: vLLM raises "Unsupported FP8 MoE backend"
                      Case{"deepseek-v3-fp8", "cpu-amx", {}, ""}),    // NONE: CPUExpertsFp8 does not take DeepSeek routing
    case_name);

// INT8 W8A8 (compressed-tensors, per-channel scales, dynamic int8 activations) on Triton: the
// checkpoint bytes, fp32 scales; on the x86 CPU, sgl-kernel's VNNI-4 pack with the s8s8
// compensation sums; on Arm, vLLM's cpu_prepack_moe_weight_int8(neon). HUMMING (external) is
// refused, and so are what vLLM refuses on Arm: I % 32 per rank, expert parallelism, macOS.
INSTANTIATE_TEST_SUITE_P(
    Int8, ConvertSamples,
    ::testing::Values(Case{"ct-w8a8-int8", "sm90", {}, "TRITON"}, Case{"ct-w8a8-int8", "sm89", {"tp=2"}, "TRITON"},
                      Case{"ct-w8a8-int8", "sm90", {"tp=2", "ep=1"}, "TRITON"}, Case{"ct-w8a8-int8", "gfx942", {}, "TRITON"},
                      Case{"ct-w8a8-int8", "cpu-amx", {}, "CPU"}, Case{"ct-w8a8-int8", "cpu-amx", {"tp=2"}, "CPU"},
                      Case{"ct-w8a8-int8", "cpu-arm", {}, "CPU", "ArmCPUExpertsInt8"},
                      Case{"ct-w8a8-int8", "cpu-arm", {"tp=2"}, "CPU", "ArmCPUExpertsInt8"},
                      Case{"ct-w8a8-int8", "cpu-arm", {"tp=4", "dtype=fp16"}, "CPU", "ArmCPUExpertsInt8"},  // I = 32 per rank
                      Case{"ct-w8a8-int8", "cpu-arm", {"tp=8"}, ""},  // I = 16 per rank: "kernel requires intermediate dim divisible by 32"
                      Case{"ct-w8a8-int8", "cpu-arm", {"tp=2", "ep=1"}, ""},
                      Case{"ct-w8a8-int8", "cpu-arm", {"darwin=1"}, ""},  // no cpu_fused_moe_int8 op on macOS
                      Case{"ct-w8a8-int8", "sm90", {"moe-backend=humming"}, ""}),
    case_name);

// W4A8 (compressed-tensors int4 group-128 weights, dynamic FP8 activations) on SM90's CUTLASS:
// the reordered int4 codes, the FP8 group-scale lookup tables and fp32 channel scales that
// QuantFP8's CUDA kernel gives, which vLLM runs without torch.compile (TORCH_COMPILE_DISABLE=1 or
// VLLM_USE_BREAKABLE_CUDAGRAPH=1; a default Qwen3 deployment compiles it with Inductor, whose
// approximate reciprocal moepack does not reproduce). Off SM90 the checkpoint takes the INT8
// activation method: CPU_INT4 on Arm, whose KleidiAI pack is not reproduced.
INSTANTIATE_TEST_SUITE_P(
    W4a8, ConvertSamples,
    ::testing::Values(Case{"ct-w4a8-fp8", "sm90", {"env=TORCH_COMPILE_DISABLE:1"}, "CUTLASS"},
                      Case{"ct-w4a8-fp8", "sm90", {"env=VLLM_USE_BREAKABLE_CUDAGRAPH:1"}, "CUTLASS"},
                      Case{"ct-w4a8-fp8", "sm90", {"env=TORCH_COMPILE_DISABLE:1", "tp=2", "ep=1"}, "CUTLASS"},
                      Case{"ct-w4a8-fp8", "sm90", {}, ""},                                        // QuantFP8 compiled by Inductor
                      Case{"ct-w4a8-fp8", "sm90", {"env=TORCH_COMPILE_DISABLE:1", "tp=2"}, ""},  // 128 per rank: create_weights' assert
                      Case{"ct-w4a8-fp8", "sm100", {}, ""},                                       // W4A8 Int8: CPU platforms only
                      Case{"ct-w4a8-fp8", "cpu-arm", {}, ""},                                     // CPU_INT4: KleidiAI's pack
                      Case{"ct-w4a8-int8", "cpu-arm", {}, ""},
                      Case{"ct-w4a8-int8", "sm90", {"env=TORCH_COMPILE_DISABLE:1"}, ""}),  // FP8 method on SM90: hidden 128
    case_name);

// MXFP8 (ModelOpt) on FlashInfer TRT-LLM: the MXFP4 TRT-LLM row orders and shuffles on FP8 bytes
// and their E8M0 scales. At TP 2 the w2 scales (2 groups per row) cannot take the 128x4
// interleave: vLLM fails at load, refused. Marlin: the FP8 Marlin weights with the MXFP4 Marlin
// E8M0 scale layout (mxfp8_marlin_process_scales is its 16-bit branch).
INSTANTIATE_TEST_SUITE_P(
    Mxfp8, ConvertSamples,
    ::testing::Values(Case{"modelopt-mxfp8", "sm100", {}, "FLASHINFER_TRTLLM"}, Case{"modelopt-mxfp8", "sm100", {"tp=2", "ep=1"}, "FLASHINFER_TRTLLM"},
                      Case{"modelopt-mxfp8", "sm100", {"tp=2"}, ""}, Case{"modelopt-mxfp8", "sm90", {}, "MARLIN"},
                      Case{"modelopt-mxfp8", "sm80", {"tp=2"}, "MARLIN"}, Case{"modelopt-mxfp8", "sm90", {"tp=2", "ep=1"}, "MARLIN"}),
    case_name);

// Intel XPU: block FP8 and int4 weights transposed (int4 as Triton's N-first bytes), their scales
// too; GPTQ's g_idx become empty [0]. Per-tensor FP8 with static inputs takes Triton there.
// Act-order (the kernel reads no g_idx), AutoAWQ params and ModelOpt MXFP8 are refused.
INSTANTIATE_TEST_SUITE_P(
    Xpu, ConvertSamples,
    ::testing::Values(Case{"ct-fp8-block", "xpu", {}, "XPU"}, Case{"deepseek-v3-fp8", "xpu", {"tp=2", "ep=1"}, "XPU"},
                      Case{"ct-fp8-tensor", "xpu", {}, "TRITON"}, Case{"gptq-int4", "xpu", {}, "XPU"}, Case{"ct-w4a16", "xpu", {}, "XPU"},
                      Case{"gptq-int4-desc-act", "xpu", {}, ""}, Case{"ct-w4a16-actorder", "xpu", {}, ""}, Case{"awq-int4", "xpu", {}, ""},
                      Case{"modelopt-mxfp8", "xpu", {}, ""}),
    case_name);

// AITER FP8: the checkpoint-layout steps, then AITER's 16x16 weight tiles (shuffle_weight); on
// MI300 (gfx942) of the normalized E4M3FNUZ weights.
INSTANTIATE_TEST_SUITE_P(
    Fp8Aiter, ConvertSamples,
    ::testing::Values(Case{"ct-fp8-block", "gfx950", {"env=VLLM_ROCM_USE_AITER:1"}, "AITER"},
                      Case{"ct-fp8-tensor", "gfx950", {"env=VLLM_ROCM_USE_AITER:1", "tp=2"}, "AITER"},
                      Case{"ct-fp8-channel", "gfx1250", {"env=VLLM_ROCM_USE_AITER:1"}, "AITER"},
                      Case{"deepseek-v3-fp8", "gfx950", {"env=VLLM_ROCM_USE_AITER:1", "tp=2", "ep=1"}, "AITER"},
                      Case{"llama4-fp8", "gfx950", {"env=VLLM_ROCM_USE_AITER:1"}, "AITER"},
                      Case{"ct-fp8-block", "gfx942", {"env=VLLM_ROCM_USE_AITER:1"}, "AITER"},
                      Case{"ct-fp8-tensor", "gfx942", {"env=VLLM_ROCM_USE_AITER:1", "tp=2"}, "AITER"},
                      Case{"deepseek-v3-fp8", "gfx942", {"env=VLLM_ROCM_USE_AITER:1"}, "AITER"},
                      Case{"modelopt-fp8", "gfx942", {"env=VLLM_ROCM_USE_AITER:1"}, ""}),
    case_name);

// The amd-quark export and openai's fused checkpoint of the same weights (the samples share the
// seed) load into the same parameters, so a backend both reach must get the same bytes.
TEST(ConvertSamplesAcrossLayouts, QuarkPerExpertGptOssPacksLikeTheFusedOne) {
  for (int tp : {1, 2}) {
    SCOPED_TRACE("tp " + std::to_string(tp));
    oracle::Deployment dep = oracle::default_deployment(oracle::parse_target("cpu-amx"));
    dep.parallel.tp = tp;
    auto convert = [&](const std::string& name, const test::TempDir& out) {
      ckpt::Checkpoint ck = ckpt::open_checkpoint(sample(name));
      ConvertRequest req;
      req.target_json = target_json(dep);
      return execute_plan(build_conversion_plan(ck, decide_layers(ck, dep), req), out.path(), ExecutorOptions{});
    };
    test::TempDir fused_dir, quark_dir;
    artifact::Manifest fused = convert("gpt-oss-mxfp4", fused_dir), quark = convert("quark-gpt-oss-w-mxfp4-a-fp8", quark_dir);
    ASSERT_EQ(fused.layers.size(), 1u);
    ASSERT_EQ(quark.layers.size(), 1u);
    ASSERT_EQ(fused.layers[0].ranks.size(), static_cast<size_t>(tp));
    size_t compared = 0;
    for (size_t r = 0; r < fused.layers[0].ranks.size(); ++r)
      for (const auto& [role, t] : fused.layers[0].ranks[r].tensors) {
        auto q = quark.layers[0].ranks[r].tensors.find(role);
        ASSERT_NE(q, quark.layers[0].ranks[r].tensors.end()) << role;
        EXPECT_EQ(q->second.layout, t.layout) << role;
        EXPECT_EQ(q->second.xxh3, t.xxh3) << role << " rank " << r;
        ++compared;
      }
    EXPECT_EQ(compared, 6u * static_cast<size_t>(tp));  // weights, scales and biases of w13 and w2
    // The Quark scales of the static FP8 inputs come on top, as loaded.
    EXPECT_TRUE(quark.layers[0].ranks[0].tensors.count("w13_input_scale"));
  }
}

}  // namespace
}  // namespace moepack::convert
