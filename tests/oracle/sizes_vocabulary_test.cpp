// Padded sizes at real model shapes, the layout table, and the oracle's vocabulary (quant keys,
// activations, routing derivation, devices, deployment parsing).
#include <map>
#include <set>

#include "lib/core/error.h"
#include "tests/oracle/oracle_cases.h"

namespace moepack::oracle::test {
namespace {

struct SizeCase {
  std::string name;
  std::string target;
  Tweak tweak;
  int tp;
  int hidden, intermediate;                // per rank before round-up
  int padded_hidden, padded_intermediate;  // after
};

// gpt-oss-120b (H = I = 2880) at TP 1/2/4/8 on every MXFP4 rounding rule (mxfp4.py
// mxfp4_round_up_hidden_size_and_intermediate_size; ERRATA 4: TRT-LLM intermediate -> 128).
TEST(PaddedSizes, GptOss120bAcrossBackendsAndTensorParallelism) {
  const std::vector<SizeCase> cases = {
      {"trtllm", "sm100", nullptr, 1, 2880, 2880, 3072, 2944},
      {"trtllm", "sm100", nullptr, 2, 2880, 1440, 3072, 1536},
      {"trtllm", "sm100", nullptr, 4, 2880, 720, 3072, 768},
      {"trtllm", "sm100", nullptr, 8, 2880, 360, 3072, 384},
      {"triton 64", "sm90", nullptr, 1, 2880, 2880, 2880, 2880},
      {"triton 64", "sm90", nullptr, 2, 2880, 1440, 2880, 1472},
      {"triton 64", "sm90", nullptr, 4, 2880, 720, 2880, 768},
      {"triton 64", "sm90", nullptr, 8, 2880, 360, 2880, 384},
      {"marlin", "sm89", nullptr, 1, 2880, 2880, 3072, 2944},
      {"marlin", "sm89", nullptr, 8, 2880, 360, 3072, 384},
      {"fi cutlass", "sm90", backend("flashinfer_cutlass"), 1, 2880, 2880, 2944, 2944},
      {"cpu 32", "cpu-amx", nullptr, 1, 2880, 2880, 2880, 2880},
      {"cpu 32", "cpu-amx", nullptr, 2, 2880, 1440, 2880, 1440},
      {"cpu 32", "cpu-amx", nullptr, 4, 2880, 720, 2880, 736},
      {"cpu 32", "cpu-amx", nullptr, 8, 2880, 360, 2880, 384},
      {"emulation 32", "gfx1250", nullptr, 4, 2880, 720, 2880, 736},
      {"rocm 256", "gfx950", nullptr, 1, 2880, 2880, 3072, 3072},
      {"rocm 256", "gfx950", nullptr, 8, 2880, 360, 3072, 512},
      {"xpu 64", "xpu", nullptr, 4, 2880, 720, 2880, 768},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name + " tp" + std::to_string(c.tp));
    Deployment d = target(c.target, all({tp(c.tp), c.tweak ? c.tweak : Tweak([](Deployment&) {})}));
    const Decision dec = decide(gpt_oss(), d);
    ASSERT_TRUE(dec.ok()) << dec.error->message;
    EXPECT_EQ(dec.hidden_size, c.hidden);
    EXPECT_EQ(dec.intermediate_size, c.intermediate);
    EXPECT_EQ(dec.padded_hidden_size, c.padded_hidden);
    EXPECT_EQ(dec.padded_intermediate_size, c.padded_intermediate);
  }
}

// Shapes already aligned for their backend's conversion padding keep their sizes (the padding
// rules themselves are tabled in padded_sizes_test.cpp).
TEST(PaddedSizes, AlignedQwenAndDeepSeekShapesKeepTheirSizes) {
  MoeLayerQuery nvfp4 = qwen3(Family::nvfp4, "modelopt_fp4");
  nvfp4.weight_key = "kNvfp4Static";
  nvfp4.activation_key = "kNvfp4Dynamic";
  Decision a = decide(nvfp4, target("sm100"));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.padded_hidden_size, 2048);
  EXPECT_EQ(a.padded_intermediate_size, 768);

  MoeLayerQuery fp8 = deepseek_v3(Family::fp8, "fp8");
  fp8.weight_key = "kFp8Static128BlockSym";
  fp8.activation_key = "kFp8Dynamic128Sym";
  Decision b = decide(fp8, target("sm90", tp(8)));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.intermediate_size, 256);
  EXPECT_EQ(b.padded_hidden_size, 7168);
  EXPECT_EQ(b.padded_intermediate_size, 256);
}

TEST(PaddedSizes, ExpertParallelKeepsWholeIntermediateAndDeepEpRoundsHidden) {
  // EP: every rank owns whole experts (no intermediate split); DeepEP low-latency rounds the
  // hidden size up to its supported list (2880 -> 3072) before the backend rule.
  const Decision d = decide(gpt_oss(), target("sm100", deepep_low_latency()));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.tp_size, 1);
  EXPECT_EQ(d.ep_size, 2);
  EXPECT_EQ(d.num_local_experts, 64);
  EXPECT_EQ(d.intermediate_size, 2880);
  EXPECT_EQ(d.padded_hidden_size, 3072);
  EXPECT_EQ(d.padded_intermediate_size, 2944);
}

TEST(PaddedSizes, DeepEpHighThroughputRoundsHiddenBytesTo512) {
  MoeLayerQuery q = qwen3(Family::unquantized, "");
  q.hidden_size = 2880;
  const Decision d = decide(q, target("sm90", [](Deployment& dep) {
                              dep.parallel.dp = 2;
                              dep.parallel.enable_expert_parallel = true;
                              dep.parallel.all2all_backend = "deepep_high_throughput";
                            }));
  ASSERT_TRUE(d.ok()) << d.error->message;
  EXPECT_EQ(d.padded_hidden_size, 3072);  // 2880 bf16 = 5760 bytes -> 6144 bytes
}

TEST(Layouts, EveryDecisionNamesTheLayoutOfEachTensorRole) {
  const Decision trtllm = decide(gpt_oss(), target("sm100"));
  ASSERT_TRUE(trtllm.ok());
  std::set<std::string> roles;
  for (const auto& [role, layout] : trtllm.tensor_layouts) {
    roles.insert(role);
    EXPECT_FALSE(layout.empty()) << role;
  }
  EXPECT_EQ(roles, (std::set<std::string>{"w13_weight", "w2_weight", "w13_weight_scale", "w2_weight_scale", "w13_bias", "w2_bias"}));

  const Decision hopper = decide(gpt_oss(), target("sm90"));
  ASSERT_TRUE(hopper.ok());
  EXPECT_EQ(hopper.tensor_layouts.front(), (std::pair<std::string, std::string>{"w13_weight", "triton_kernels.HopperMXValue(mx_axis=1,v3.5.1)"}));

  // No expert biases, no bias roles.
  MoeLayerQuery nvfp4 = qwen3(Family::nvfp4, "modelopt_fp4");
  nvfp4.weight_key = "kNvfp4Static";
  const Decision a16 = decide(nvfp4, target("sm100"));
  ASSERT_TRUE(a16.ok());
  for (const auto& [role, layout] : a16.tensor_layouts) {
    EXPECT_EQ(role.find("bias"), std::string::npos);
    EXPECT_EQ(role.find("input_scale"), std::string::npos) << "W4A16 has no activation scales";
  }
  EXPECT_FALSE(layout_catalog().empty());
}

// CUTLASS W4A8: the FP8 scales are named as reproduced only when vLLM runs QuantFP8's CUDA
// kernel, i.e. without torch.compile (VllmConfig.__post_init__ @ e9d1398d9).
TEST(Layouts, W4a8ScalesFollowTheCompilationMode) {
  MoeLayerQuery q = qwen3(Family::w4a8, "compressed-tensors");
  q.weight_bits = 4;
  q.group_size = 128;
  q.architecture = "Qwen3MoeForCausalLM";
  auto layouts = [&](const MoeLayerQuery& query, const Tweak& t) {
    const Decision d = decide(query, target("sm90", t));
    EXPECT_EQ(d.backend.value_or(""), "CUTLASS") << (d.error ? d.error->message : "");
    return std::map<std::string, std::string>(d.tensor_layouts.begin(), d.tensor_layouts.end());
  };
  const auto compiled = layouts(q, nullptr);
  EXPECT_NE(compiled.at("w13_weight_scale").find("not_reproduced"), std::string::npos);
  EXPECT_EQ(compiled.count("w13_weight_chan_scale"), 0u);
  EXPECT_EQ(compiled.at("w13_weight_packed"), "vllm.cutlass_encode_and_reorder_int4b_grouped(from=uint4b8,cutlass v4.4.2,e9d1398d9)");
  const auto eager = layouts(q, env("TORCH_COMPILE_DISABLE", "1"));
  EXPECT_EQ(eager.at("w2_weight_scale").rfind("vllm.w4a8_fp8_group_scales(quant_fp8=cuda_kernel,e9d1398d9) | ", 0), 0u);
  EXPECT_EQ(eager.at("w2_weight_chan_scale"), "vllm.w4a8_fp8_channel_scales(quant_fp8=cuda_kernel,e9d1398d9) | vllm.unchanged");
  EXPECT_EQ(eager.at("w13_weight_shape"), "vllm.unchanged");
  EXPECT_EQ(layouts(q, env("VLLM_USE_BREAKABLE_CUDAGRAPH", "1")), eager);
  EXPECT_EQ(layouts(q, env("TORCH_COMPILE_DISABLE", "0")), compiled);
  // DeepSeek-V4 defaults to breakable CUDA graphs (mode NONE) unless the variable is exported.
  MoeLayerQuery v4 = q;
  v4.architecture = "DeepseekV4ForCausalLM";
  EXPECT_EQ(layouts(v4, nullptr), eager);
  EXPECT_EQ(layouts(v4, env("VLLM_USE_BREAKABLE_CUDAGRAPH", "0")), compiled);
  EXPECT_TRUE(compilation_mode_none(target("gfx942"), "DeepseekV4ForCausalLM"));
  EXPECT_FALSE(compilation_mode_none(target("gfx942"), "DeepseekV32ForCausalLM"));  // ROCm drops V3.2
  EXPECT_TRUE(compilation_mode_none(target("sm90"), "DeepseekV32ForCausalLM"));
}

// AITER A16W4 with a SiTU model (Kimi-K3-like, generic converter): w13 is shuffled with the
// gate/up flag only when the SiTU-v2 A8W4 kernel is enabled; both variants are catalogued.
TEST(Layouts, AiterSituW13FollowsTheSituV2Flag) {
  MoeLayerQuery q = qwen3(Family::mxfp4, "mxfp4");
  q.model_type = "kimi_k3";
  q.weight_key = "kMxfp4Static";
  q.activation = "situ";
  auto layouts = [&](const Tweak& t) {
    const Decision d = decide(q, target("gfx950", t));
    EXPECT_TRUE(d.ok()) << (d.error ? d.error->message : "");
    EXPECT_EQ(d.backend.value_or(""), "AITER_MXFP4_BF16");
    std::map<std::string, std::string> m(d.tensor_layouts.begin(), d.tensor_layouts.end());
    return m;
  };
  const auto plain = layouts(env("VLLM_ROCM_USE_AITER", "1"));
  const auto v2 = layouts(all({env("VLLM_ROCM_USE_AITER", "1"), env("VLLM_ROCM_USE_AITER_MOE_SITUV2_A8W4", "1")}));
  ASSERT_TRUE(plain.count("w13_weight") && v2.count("w13_weight"));
  EXPECT_EQ(plain.at("w13_weight"), plain.at("w2_weight")) << "without SiTU-v2 both projections get the same shuffle";
  EXPECT_NE(v2.at("w13_weight"), v2.at("w2_weight")) << "SiTU-v2 interleaves gate/up in w13";
  EXPECT_EQ(v2.at("w2_weight"), plain.at("w2_weight"));
  int situ_rows = 0;
  for (const auto& row : layout_catalog())
    if (row.condition.find("SiTU") != std::string::npos) ++situ_rows;
  EXPECT_EQ(situ_rows, 2);
}

TEST(QuantKeys, StructuralEqualityAndNames) {
  EXPECT_EQ(quant_key_by_name("kMxfp4Static"), keys::kMxfp4Static);
  EXPECT_NE(keys::kMxfp4Static, keys::kMxfp4Dynamic);  // differ only in static/dynamic
  EXPECT_NE(keys::kInt4Static, keys::kInt4StaticAsym);
  EXPECT_EQ(quant_key_name(keys::kNvfp4Static).value_or(""), "kNvfp4Static");
  EXPECT_FALSE(quant_key_by_name("kNoSuchKey"));
  // A key built from checkpoint facts equals the named constant.
  EXPECT_EQ(wna16_weight_key(4, 32, true), keys::kInt4Static32);
  EXPECT_EQ(wna16_weight_key(4, 128, true), keys::kInt4Static);
  EXPECT_EQ(wna16_weight_key(4, 128, false), keys::kInt4StaticAsym);
  EXPECT_EQ(wna16_weight_key(8, 128, true), keys::kInt8Static);
  EXPECT_FALSE(quant_key_name(*wna16_weight_key(8, 128, false)));  // asymmetric int8 has no constant
  EXPECT_FALSE(wna16_weight_key(3, 128, false));                   // zero points only for 4 and 8 bits
  EXPECT_EQ(w4a8_int8_weight_key(64), keys::kInt4W4A8StaticGroup64Sym);
  EXPECT_EQ(quant_key_by_user_name("mxfp8"), keys::kMxfp8Dynamic);
  EXPECT_EQ(quant_key_by_user_name("fp8_per_block_dynamic"), keys::kFp8Dynamic128Sym);
}

TEST(QuantKeys, TextMatchesVllmStr) {
  EXPECT_EQ(quant_key_text(keys::kMxfp4Static), "QuantKey(u8,scale(u8,static,GroupShape(row=1, col=32)),symmetric)");
  EXPECT_EQ(quant_key_text(keys::kNvfp4Dynamic),
            "QuantKey(u8,scale(f8e4m3fn,dynamic,GroupShape(row=1, col=16)),scale2(f32,static,per_tensor),symmetric)");
  EXPECT_EQ(quant_key_text(keys::kInt4StaticAsym), "QuantKey(uint4,scale(f16,static,per_token),asymmetric)");
  EXPECT_EQ(quant_key_text(keys::kFp8StaticTensorSym, true), "QuantKey(f8e4m3fnuz,scale(f32,static,per_tensor),symmetric)");
  EXPECT_EQ(quant_key_text(std::nullopt), "None");
}

TEST(Vocabulary, ActivationsAndRouting) {
  EXPECT_EQ(parse_activation("gelu_pytorch_tanh"), MoEActivation::GELU_TANH);
  EXPECT_FALSE(parse_activation("tanh"));
  EXPECT_TRUE(is_gated(MoEActivation::SWIGLUOAI));
  EXPECT_FALSE(is_gated(MoEActivation::RELU2_NO_MUL));
  EXPECT_FALSE(apply_moe_activation_supported(MoEActivation::RELU2));
  EXPECT_TRUE(apply_moe_activation_supported(MoEActivation::RELU2_NO_MUL));
  EXPECT_EQ(activation_repr(MoEActivation::SWIGLUOAI), "MoEActivation.SWIGLUOAI");

  using R = RoutingMethodType;
  EXPECT_EQ(get_routing_method_type("softmax", true, 0, false, 1.0), R::RenormalizeNaive);   // gpt-oss, Qwen, Mixtral
  EXPECT_EQ(get_routing_method_type("softmax", false, 0, false, 1.0), R::Default);
  EXPECT_EQ(get_routing_method_type("sigmoid", true, 8, true, 2.5), R::DeepSeekV3);          // DeepSeek-V3
  EXPECT_EQ(get_routing_method_type("sigmoid", true, 0, true, 1.0), R::MiniMax2);
  EXPECT_EQ(get_routing_method_type("sigmoid", true, 0, true, std::nullopt), R::MiniMax2);
  EXPECT_EQ(get_routing_method_type("sigmoid", true, 0, true, 2.0), R::Unspecified);
  EXPECT_EQ(get_routing_method_type("sigmoid", false, 8, true, 1.0), R::Unspecified);
  EXPECT_EQ(get_routing_method_type("softmax", true, 0, true, 1.0), R::Unspecified);
  EXPECT_EQ(get_routing_method_type("sigmoid", true, 0, false, 1.0), R::SigmoidRenorm);
  EXPECT_EQ(get_routing_method_type("sigmoid", false, 0, false, 1.0), R::Sigmoid);
  EXPECT_EQ(get_routing_method_type("sqrtsoftplus", true, 0, true, 1.0), R::DeepseekV4);
  EXPECT_EQ(get_routing_method_type("sqrtsoftplus", false, 0, true, 1.0), R::Unspecified);
}

TEST(Devices, CapabilityPredicatesAndFamilies) {
  const Device sm103 = parse_target("sm103");
  EXPECT_TRUE(sm103.is_device_capability_family(100));
  EXPECT_TRUE(sm103.has_device_capability(100));
  EXPECT_FALSE(sm103.is_device_capability(100));
  const Device sm110 = parse_target("sm110");
  EXPECT_FALSE(sm110.is_device_capability_family(100));  // SM110 is its own family
  EXPECT_TRUE(sm110.is_device_capability_family(110));
  EXPECT_TRUE(parse_target("sm121").is_device_capability_family(120));
  EXPECT_TRUE(parse_target("sm89").supports_fp8());
  EXPECT_FALSE(parse_target("sm86").supports_fp8());

  const Device mi300 = parse_target("gfx942");
  EXPECT_TRUE(mi300.has_device_capability(90));  // gfx942 -> 9.4
  EXPECT_FALSE(mi300.is_cuda());
  EXPECT_TRUE(mi300.on_gfx9());
  EXPECT_TRUE(mi300.fp8_is_fnuz());
  EXPECT_EQ(mi300.cdna_version(), 3);
  EXPECT_FALSE(mi300.supports_mx());
  const Device mi355 = parse_target("gfx950");
  EXPECT_EQ(mi355.cdna_version(), 4);
  EXPECT_TRUE(mi355.supports_mx());
  EXPECT_FALSE(mi355.fp8_is_fnuz());
  const Device g1250 = parse_target("gfx1250");
  EXPECT_EQ(g1250.capability()->to_int(), 125);
  EXPECT_TRUE(g1250.on_cdna());
  EXPECT_FALSE(g1250.on_gfx1x());  // CDNA-classified despite the gfx12 prefix
  EXPECT_FALSE(g1250.on_gfx9());
  EXPECT_TRUE(g1250.supports_mx());

  const Device cpu = parse_target("cpu-amx");
  EXPECT_FALSE(cpu.capability());
  EXPECT_FALSE(cpu.has_device_capability(0));
  EXPECT_TRUE(cpu.amx_tiles);
  EXPECT_FALSE(parse_target("cpu-avx512").amx_tiles);
  EXPECT_EQ(parse_target("cpu-arm").cpu_arch, CpuArch::arm);
  EXPECT_TRUE(parse_target("host").is_cpu());
  EXPECT_THROW(parse_target("sm99"), moepack::Error);
}

TEST(Deployments, EnvironmentPackagesAndParallelism) {
  EnvVars env;
  EXPECT_FALSE(env.is_set("VLLM_USE_DEEP_GEMM"));
  EXPECT_TRUE(env.int_flag("VLLM_USE_DEEP_GEMM", true));  // default when not exported
  env.set("VLLM_USE_DEEP_GEMM", "0");
  EXPECT_TRUE(env.is_set("VLLM_USE_DEEP_GEMM"));
  EXPECT_FALSE(env.int_flag("VLLM_USE_DEEP_GEMM", true));
  env.set("VLLM_ROCM_USE_AITER", "True");
  EXPECT_TRUE(env.true_flag("VLLM_ROCM_USE_AITER", false));
  env.set("VLLM_BATCH_INVARIANT", "yes");
  EXPECT_THROW(env.int_flag("VLLM_BATCH_INVARIANT", false), moepack::Error);  // int("yes") fails in vLLM too

  const Packages cuda = default_packages(parse_target("sm90"));
  EXPECT_TRUE(cuda.flashinfer && cuda.triton_kernels && cuda.deep_gemm && cuda.humming);
  EXPECT_FALSE(cuda.amd_quark || cuda.aiter);
  const Packages rocm = default_packages(parse_target("gfx950"));
  EXPECT_TRUE(rocm.amd_quark && rocm.aiter && rocm.triton_kernels);
  EXPECT_FALSE(rocm.flashinfer);
  Packages p;
  set_package(p, "amd_quark", true);
  EXPECT_TRUE(p.amd_quark);
  EXPECT_THROW(set_package(p, "tensorrt", true), moepack::Error);

  ParallelInput in;
  in.tp = 4;
  in.dp = 2;
  MoeParallelConfig no_ep = make_moe_parallel_config(in);
  EXPECT_EQ(no_ep.tp_size, 8);  // the MoE is sharded over dp * tp ranks
  EXPECT_FALSE(no_ep.use_all2all_kernels());
  in.enable_expert_parallel = true;
  in.all2all_backend = "deepep_low_latency";
  MoeParallelConfig ep = make_moe_parallel_config(in);
  EXPECT_EQ(ep.tp_size, 1);
  EXPECT_EQ(ep.ep_size, 8);
  EXPECT_TRUE(ep.use_all2all_kernels());
  EXPECT_TRUE(ep.use_batched_activation_format());

  EXPECT_EQ(normalize_moe_backend("FlashInfer-TRTLLM"), "flashinfer_trtllm");
}

TEST(Catalog, BackendsAndClassesAreListed) {
  const auto backends = backend_catalog();
  EXPECT_TRUE(std::any_of(backends.begin(), backends.end(), [](const BackendListing& b) {
    return b.family == "nvfp4" && b.backend == "FLASHINFER_B12X" && !b.auto_selectable;
  }));
  const auto classes = experts_class_catalog();
  EXPECT_TRUE(std::any_of(classes.begin(), classes.end(), [](const ExpertsClassListing& c) { return c.name == "MarlinExperts"; }));
}

TEST(Queries, MalformedQueriesAreBadInput) {
  MoeLayerQuery q = gpt_oss();
  q.hidden_size = 0;
  EXPECT_THROW(decide(q, target("sm90")), moepack::Error);
  q = gpt_oss();
  q.weight_key = "kMxfp4Statc";
  EXPECT_THROW(decide(q, target("sm90")), moepack::Error);
  q = gpt_oss();
  q.activation = "swish";
  EXPECT_THROW(decide(q, target("sm90")), moepack::Error);
}

}  // namespace
}  // namespace moepack::oracle::test
