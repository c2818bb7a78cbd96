// The loader facts (lib/convert/loader_facts.h), each pinned against the upstream source it was
// read from (vllm-project/vllm @ e9d1398d9 unless said otherwise), and swept over every shipped
// sample so that no architecture or role moepack converts is left without a place.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "formats/checkpoints/checkpoint.h"
#include "lib/convert/loader_facts.h"
#include "lib/convert/plan.h"
#include "lib/oracle/deployment.h"
#include "lib/oracle/oracle.h"
#include "support/test_support.h"

namespace moepack::convert {
namespace {
namespace fs = std::filesystem;

LoaderQuery layer(const std::string& arch, const std::string& prefix, const std::string& family, const std::string& backend, int64_t experts = 4) {
  LoaderQuery q;
  q.architecture = arch;
  q.checkpoint_expert_prefix = prefix;
  q.family = family;
  q.backend = backend;
  q.num_local_experts = experts;
  q.hidden_size = 256;
  q.intermediate_size = 128;
  return q;
}

const RunFact* find(const std::vector<RunFact>& facts, const std::string& name) {
  for (const RunFact& f : facts)
    if (f.name == name) return &f;
  return nullptr;
}

std::vector<std::string> names(const std::vector<RunFact>& facts) {
  std::vector<std::string> out;
  for (const RunFact& f : facts) out.push_back(f.name);
  return out;
}

// ---- 1. Where each tensor lives ------------------------------------------------------------

// FusedMoEFactory (fused_moe/layer.py) returns a MoERunner whose `routed_experts` attribute is the
// RoutedExperts module the quant method registers every parameter on (routed_experts.py,
// create_weights(layer=self)); weight_utils.py maybe_remap_moe_expert_param_name documents
// `layers.0.mlp.experts.w13_weight` -> `layers.0.mlp.experts.routed_experts.w13_weight`.
TEST(LoaderFacts, ParametersLiveOnTheRoutedExpertsSubmodule) {
  EXPECT_EQ(vllm_param_path("Qwen3MoeForCausalLM", "model.layers.7.mlp.experts", "w13_weight"), "model.layers.7.mlp.experts.routed_experts.w13_weight");
  EXPECT_EQ(vllm_param_path("Qwen2MoeForCausalLM", "model.layers.0.mlp.experts", "w2_weight_scale"), "model.layers.0.mlp.experts.routed_experts.w2_weight_scale");
  // gpt_oss.py: MLPBlock.experts under TransformerBlock.mlp; the mapper renames suffixes only.
  EXPECT_EQ(vllm_param_path("GptOssForCausalLM", "model.layers.0.mlp.experts", "w13_bias"), "model.layers.0.mlp.experts.routed_experts.w13_bias");
  // mixtral.py: MixtralDecoderLayer.block_sparse_moe -> MixtralMoE.experts.
  EXPECT_EQ(vllm_param_path("MixtralForCausalLM", "model.layers.0.block_sparse_moe.experts", "w2_weight"),
            "model.layers.0.block_sparse_moe.experts.routed_experts.w2_weight");
  // deepseek_v2.py: expert mapping `experts.<E>.gate_proj.` -> `experts.routed_experts.w13_`;
  // Fp8MoEMethod's block scales are named weight_scale_inv.
  EXPECT_EQ(vllm_param_path("DeepseekV3ForCausalLM", "model.layers.3.mlp.experts", "w13_weight_scale_inv"),
            "model.layers.3.mlp.experts.routed_experts.w13_weight_scale_inv");
  EXPECT_EQ(vllm_param_path("DeepseekV2ForCausalLM", "model.layers.1.mlp.experts", "w2_weight"), "model.layers.1.mlp.experts.routed_experts.w2_weight");
  // The registered parameters of TrtLlmNvFp4Experts and FP8's FlashInfer CUTLASS alphas sit
  // beside the loaded ones (layer.register_parameter on the RoutedExperts).
  EXPECT_EQ(vllm_param_path("Qwen3MoeForCausalLM", "model.layers.0.mlp.experts", "g1_scale_c"), "model.layers.0.mlp.experts.routed_experts.g1_scale_c");
  EXPECT_EQ(vllm_param_path("Qwen3MoeForCausalLM", "model.layers.0.mlp.experts", "g1_alphas"), "model.layers.0.mlp.experts.routed_experts.g1_alphas");
}

// Model classes whose module path differs from the checkpoint's names.
TEST(LoaderFacts, ModelClassesThatRenameThePrefix) {
  // DeepSeek-V4: _make_deepseek_v4_weights_mapper, orig_to_new_prefix "layers." -> "model.layers.";
  // DeepseekV4DecoderLayer.ffn -> DeepseekV4MoE.experts (models/deepseek_v4/nvidia/model.py).
  EXPECT_EQ(vllm_param_path("DeepseekV4ForCausalLM", "layers.0.ffn.experts", "w13_weight"), "model.layers.0.ffn.experts.routed_experts.w13_weight");
  EXPECT_EQ(vllm_param_path("DeepseekV4ForCausalLM", "model.layers.2.ffn.experts", "w2_weight"), "model.layers.2.ffn.experts.routed_experts.w2_weight");
  // Llama-4 multimodal: Llama4ForConditionalGeneration.language_model (mllama4.py); ModelOpt's
  // `model.` names are renamed to `language_model.model.` (_rename_weight_for_modelopt_checkpoint).
  EXPECT_EQ(vllm_param_path("Llama4ForConditionalGeneration", "language_model.model.layers.0.feed_forward.experts", "w13_input_scale"),
            "language_model.model.layers.0.feed_forward.experts.routed_experts.w13_input_scale");
  EXPECT_EQ(vllm_param_path("Llama4ForConditionalGeneration", "model.layers.1.feed_forward.experts", "w13_weight"),
            "language_model.model.layers.1.feed_forward.experts.routed_experts.w13_weight");
  EXPECT_EQ(vllm_param_path("Llama4ForCausalLM", "model.layers.1.feed_forward.experts", "w13_weight"), "model.layers.1.feed_forward.experts.routed_experts.w13_weight");
  // Nemotron-H: hf_to_vllm_mapper orig_to_new_prefix {"backbone": "model"}; NemotronHMoE is the mixer.
  EXPECT_EQ(vllm_param_path("NemotronHForCausalLM", "backbone.layers.1.mixer.experts", "w13_weight_scale_2"),
            "model.layers.1.mixer.experts.routed_experts.w13_weight_scale_2");
  EXPECT_EQ(vllm_moe_module_path("NemotronHForCausalLM", "backbone.layers.1.mixer.experts"), "model.layers.1.mixer.experts");
}

TEST(LoaderFacts, UnknownArchitecturesAreNotGuessed) {
  EXPECT_EQ(vllm_param_path("SomethingElseForCausalLM", "model.layers.0.mlp.experts", "w13_weight"), "");
  EXPECT_FALSE(vllm_moe_module_path("SomethingElseForCausalLM", "model.layers.0.mlp.experts").has_value());
  EXPECT_FALSE(vllm_moe_module_path("Qwen3MoeForCausalLM", "").has_value());
  LoaderQuery q = layer("", "model.layers.0.mlp.experts", "mxfp4", "TRITON");
  EXPECT_FALSE(vllm_param_place(q, "w13_weight").has_value());
}

// For the classes that keep the checkpoint prefix, the rule is exactly vLLM's
// maybe_remap_moe_expert_param_name: the first ".experts." becomes ".experts.routed_experts.".
TEST(LoaderFacts, MatchesVllmsOwnRemapForUnrenamedClasses) {
  for (const std::string arch : {"GptOssForCausalLM", "MixtralForCausalLM", "Qwen3MoeForCausalLM", "DeepseekV3ForCausalLM", "Llama4ForCausalLM"}) {
    for (const std::string prefix : {"model.layers.0.mlp.experts", "model.layers.11.block_sparse_moe.experts", "model.layers.5.feed_forward.experts"}) {
      std::string name = prefix + ".w13_weight";
      std::string remapped = name;
      remapped.replace(remapped.find(".experts."), 9, ".experts.routed_experts.");
      EXPECT_EQ(vllm_param_path(arch, prefix, "w13_weight"), remapped) << arch << " " << prefix;
    }
  }
}

// lora/layers/fused_moe.py: FusedMoEWithLoRA keeps the MoERunner as `base_layer` and sets the
// RoutedExperts' lora_base_layer_prefix to "base_layer.".
TEST(LoaderFacts, LoraWrapsTheRunner) {
  LoaderQuery q = layer("Qwen3MoeForCausalLM", "model.layers.0.mlp.experts", "unquantized", "TRITON");
  q.lora = true;
  auto place = vllm_param_place(q, "w13_weight");
  ASSERT_TRUE(place);
  EXPECT_EQ(place->path, "model.layers.0.mlp.experts.base_layer.routed_experts.w13_weight");
  EXPECT_EQ(place->holder, Holder::parameter);
}

// quantization/mxfp4.py _setup_kernel: TRITON backends assign the triton_kernels weights as
// plain attributes (`layer.w13_weight = w13`) and keep the swizzled scales in
// `self.w13_precision_config` (oracle/mxfp4.py deletes the weight and scale Parameters).
TEST(LoaderFacts, TritonMxfp4HoldsWeightsAndScalesOutsideParameters) {
  LoaderQuery q = layer("GptOssForCausalLM", "model.layers.0.mlp.experts", "mxfp4", "TRITON");
  q.method_class = "GptOssMxfp4MoEMethod";
  auto w = vllm_param_place(q, "w13_weight");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->path, "model.layers.0.mlp.experts.routed_experts.w13_weight");
  EXPECT_EQ(w->holder, Holder::module_attribute);
  auto s = vllm_param_place(q, "w2_weight_scale");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->path, "model.layers.0.mlp.experts.routed_experts.quant_method.w2_precision_config.weight_scale");
  EXPECT_EQ(s->holder, Holder::kernel_attribute);
  auto b = vllm_param_place(q, "w13_bias");  // replace_parameter: still a Parameter
  ASSERT_TRUE(b);
  EXPECT_EQ(b->holder, Holder::parameter);

  LoaderQuery v4 = layer("DeepseekV4ForCausalLM", "layers.0.ffn.experts", "mxfp4", "TRITON_UNFUSED");
  v4.method_class = "Mxfp4MoEMethod";
  EXPECT_EQ(vllm_param_place(v4, "w13_weight_scale")->path, "model.layers.0.ffn.experts.routed_experts.quant_method.w13_precision_config.weight_scale");

  // Mxfp4MoEMethod takes the same format for AITER_MXFP4_BF16 on gfx1250 only; gpt-oss's method
  // does not (convert_gpt_oss_weight_to_mxfp4_moe_kernel_format shuffles for AITER instead).
  LoaderQuery aiter = layer("DeepseekV4ForCausalLM", "layers.0.ffn.experts", "mxfp4", "AITER_MXFP4_BF16");
  aiter.method_class = "Mxfp4MoEMethod";
  aiter.device = "gfx1250";
  EXPECT_EQ(vllm_param_place(aiter, "w13_weight")->holder, Holder::module_attribute);
  aiter.device = "gfx950";
  EXPECT_EQ(vllm_param_place(aiter, "w13_weight")->holder, Holder::parameter);
  LoaderQuery oss = aiter;
  oss.method_class = "GptOssMxfp4MoEMethod";
  oss.device = "gfx1250";
  EXPECT_EQ(vllm_param_place(oss, "w13_weight")->holder, Holder::parameter);
  // quark_moe.py QuarkOCP_MX_MoEMethod: TRITON_BACKENDS or AITER_MXFP4_FP8.
  LoaderQuery quark = layer("Qwen3MoeForCausalLM", "model.layers.0.mlp.experts", "mxfp4", "AITER_MXFP4_FP8");
  quark.method_class = "QuarkOCP_MX_MoEMethod";
  EXPECT_EQ(vllm_param_place(quark, "w13_weight")->holder, Holder::module_attribute);

  // TRITON of another family keeps Parameters.
  LoaderQuery bf16 = layer("Qwen3MoeForCausalLM", "model.layers.0.mlp.experts", "unquantized", "TRITON");
  EXPECT_EQ(vllm_param_place(bf16, "w13_weight")->holder, Holder::parameter);
}

// experts/flashinfer_b12x_moe.py: fc2_input_scale is the experts object's _fc2_input_scale.
TEST(LoaderFacts, B12xFc2InputScaleLivesOnTheExpertsKernel) {
  LoaderQuery q = layer("Qwen3MoeForCausalLM", "model.layers.0.mlp.experts", "nvfp4", "FLASHINFER_B12X");
  auto p = vllm_param_place(q, "fc2_input_scale");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->path, "model.layers.0.mlp.experts.routed_experts.quant_method.moe_kernel.fused_experts._fc2_input_scale");
  EXPECT_EQ(p->holder, Holder::kernel_attribute);
  EXPECT_EQ(holder_name(p->holder), "kernel_attribute");
}

// ---- 2. Tensors made at load time ----------------------------------------------------------

// flashinfer_b12x_moe.py process_weights_after_loading: ones(num_local_experts) float32 for W4A16
// (or the static a2_gscale filled with 1.0); the MMA views share the scales' storage (flashinfer
// v0.6.17 cute_dsl/utils.py convert_sf_to_mma_layout returns a permuted view).
TEST(LoaderFacts, B12xCachesOnesAsTheFc2InputScale) {
  LoaderQuery q = layer("Qwen3MoeForCausalLM", "model.layers.0.mlp.experts", "nvfp4", "FLASHINFER_B12X", 8);
  auto facts = load_time_tensors(q);
  EXPECT_EQ(names(facts), (std::vector<std::string>{"_fc2_input_scale", "w1_sf_mma", "w2_sf_mma"}));
  const RunFact& f = facts[0];
  EXPECT_EQ(f.dtype, "F32");
  EXPECT_EQ(f.shape, (std::vector<int64_t>{8}));
  EXPECT_EQ(f.shape_text, "[num_local_experts]");
  EXPECT_EQ(f.value, "ones");
  EXPECT_EQ(f.path, "quant_method.moe_kernel.fused_experts._fc2_input_scale");
  EXPECT_EQ(f.written_as, "fc2_input_scale");
  EXPECT_EQ(f.view_of, "");
  EXPECT_EQ(find(facts, "w1_sf_mma")->view_of, "w13_weight_scale");
  EXPECT_EQ(find(facts, "w2_sf_mma")->view_of, "w2_weight_scale");
}

// trtllm_nvfp4_moe.py: g1_scale_c, gemm1_clamp_limit, gemm1_beta and gemm1_alpha are registered
// on the layer in process_weights_after_loading; the clamp and beta are divided by g1_alphas
// (w13_weight_scale_2 after its in-place multiply by w13_input_scale), alpha is not.
TEST(LoaderFacts, TrtllmNvfp4RegistersScalarsPerExpert) {
  LoaderQuery q = layer("Qwen3MoeForCausalLM", "model.layers.0.mlp.experts", "nvfp4", "FLASHINFER_TRTLLM", 4);
  q.swiglu_limit = 7.0;
  q.swiglu_alpha = 1.702;
  q.swiglu_beta = 1.0;
  auto facts = load_time_tensors(q);
  EXPECT_EQ(names(facts), (std::vector<std::string>{"g1_scale_c", "gemm1_clamp_limit", "gemm1_beta", "gemm1_alpha", "a1_gscale", "a2_gscale"}));
  EXPECT_EQ(find(facts, "g1_scale_c")->value, "w13_weight_scale_2 * w13_input_scale * (1 / w2_input_scale)");
  EXPECT_EQ(find(facts, "g1_scale_c")->holder, Holder::parameter);
  EXPECT_EQ(find(facts, "g1_scale_c")->written_as, "g1_scale_c");
  EXPECT_EQ(find(facts, "gemm1_clamp_limit")->value, "full(7.0) / (w13_weight_scale_2 * w13_input_scale)");
  EXPECT_EQ(find(facts, "gemm1_clamp_limit")->written_as, "gemm1_clamp_limit");
  EXPECT_EQ(find(facts, "gemm1_beta")->written_as, "gemm1_beta");
  // The alpha Parameter is not in the artifact: a runner makes it.
  EXPECT_EQ(find(facts, "gemm1_alpha")->value, "full(1.702)");
  EXPECT_EQ(find(facts, "gemm1_alpha")->holder, Holder::parameter);
  EXPECT_EQ(find(facts, "gemm1_alpha")->written_as, "");
  EXPECT_EQ(find(facts, "gemm1_alpha")->shape, (std::vector<int64_t>{4}));
  // oracle/nvfp4.py make_nvfp4_moe_quant_config: a1_gscale = 1.0 / a13_scale.
  EXPECT_EQ(find(facts, "a1_gscale")->value, "1 / w13_input_scale");
  EXPECT_EQ(find(facts, "a1_gscale")->path, "quant_method.moe_quant_config.a1_gscale");

  // Without a gate: g1_scale_c = a2_gscale.clone() and no SwiGLU tensors (Nemotron-H relu2).
  LoaderQuery plain = q;
  plain.gated = false;
  plain.activation = "relu2_no_mul";
  auto p = load_time_tensors(plain);
  EXPECT_EQ(names(p), (std::vector<std::string>{"g1_scale_c", "a1_gscale", "a2_gscale"}));
  EXPECT_EQ(p[0].value, "1 / w2_input_scale");

  // SiTU: beta -> gemm1_alpha, linear beta -> gemm1_beta, unfolded; no clamp.
  LoaderQuery situ = q;
  situ.activation = "situ";
  situ.situ_beta = 4.0;
  situ.situ_linear_beta = 25.0;
  auto s = load_time_tensors(situ);
  EXPECT_EQ(names(s), (std::vector<std::string>{"g1_scale_c", "gemm1_alpha", "gemm1_beta", "a1_gscale", "a2_gscale"}));
  EXPECT_EQ(find(s, "g1_scale_c")->value, "1 / w2_input_scale");
  EXPECT_EQ(find(s, "gemm1_alpha")->value, "full(4.0)");
  EXPECT_EQ(find(s, "gemm1_beta")->value, "full(25.0)");
}

// trtllm_mxfp4_moe.py: torch.tensor([v] * num_local_experts, float32) from the quant config;
// GptOssMxfp4MoEMethod passes gemm1_alpha=1.702, gemm1_beta=1.0, swiglu_limit=7.0
// (quantization/mxfp4.py), Mxfp4MoEMethod the layer's swiglu_limit only.
TEST(LoaderFacts, Mxfp4FlashInferSwigluTensors) {
  LoaderQuery q = layer("GptOssForCausalLM", "model.layers.0.mlp.experts", "mxfp4", "FLASHINFER_TRTLLM_MXFP4_BF16", 32);
  q.method_class = "GptOssMxfp4MoEMethod";
  q.activation = "swigluoai";
  auto facts = load_time_tensors(q);
  EXPECT_EQ(names(facts), (std::vector<std::string>{"gemm1_clamp_limit", "gemm1_alpha", "gemm1_beta"}));
  EXPECT_EQ(find(facts, "gemm1_clamp_limit")->value, "full(7.0)");
  EXPECT_EQ(find(facts, "gemm1_alpha")->value, "full(1.702)");
  EXPECT_EQ(find(facts, "gemm1_beta")->value, "full(1.0)");
  EXPECT_EQ(find(facts, "gemm1_beta")->dtype, "F32");
  EXPECT_EQ(find(facts, "gemm1_beta")->shape, (std::vector<int64_t>{32}));
  EXPECT_EQ(find(facts, "gemm1_beta")->path, "quant_method.moe_kernel.fused_experts.gemm1_beta");

  LoaderQuery v4 = layer("DeepseekV4ForCausalLM", "layers.0.ffn.experts", "mxfp4", "FLASHINFER_TRTLLM_MXFP4_MXFP8");
  v4.method_class = "Mxfp4MoEMethod";
  v4.swiglu_limit = 10.0;
  v4.swiglu_alpha = 1.5;  // not passed by Mxfp4MoEMethod
  EXPECT_EQ(names(load_time_tensors(v4)), (std::vector<std::string>{"gemm1_clamp_limit"}));
  EXPECT_EQ(load_time_tensors(v4)[0].value, "full(10.0)");

  // gpt_oss.py passes no swiglu_* to FusedMoEFactory: a recorded clamp of 7.0 is not the
  // layer's, so gpt-oss BF16 on FlashInfer CUTLASS gets no SwiGLU tensors.
  LoaderQuery bf16 = layer("GptOssForCausalLM", "model.layers.0.mlp.experts", "unquantized", "FLASHINFER_CUTLASS");
  bf16.swiglu_limit = 7.0;
  EXPECT_TRUE(load_time_tensors(bf16).empty());
  bf16.architecture = "DeepseekV4ForCausalLM";  // passes swiglu_limit=self.swiglu_limit
  EXPECT_EQ(names(load_time_tensors(bf16)), (std::vector<std::string>{"gemm1_clamp_limit"}));

  // flashinfer_cutlass_moe.py: the same per-expert values, and for MXFP4 x MXFP8 a
  // fake_input_scale of ones.
  LoaderQuery cutlass = q;
  cutlass.backend = "FLASHINFER_CUTLASS_MXFP4_MXFP8";
  EXPECT_EQ(names(load_time_tensors(cutlass)), (std::vector<std::string>{"gemm1_clamp_limit", "gemm1_alpha", "gemm1_beta", "fake_input_scale"}));
  EXPECT_EQ(find(load_time_tensors(cutlass), "fake_input_scale")->value, "ones");
  cutlass.backend = "FLASHINFER_CUTLASS_MXFP4_BF16";
  EXPECT_EQ(names(load_time_tensors(cutlass)), (std::vector<std::string>{"gemm1_clamp_limit", "gemm1_alpha", "gemm1_beta"}));
}

// oracle/fp8.py make_fp8_moe_quant_config (FLASHINFER_CUTLASS / HPC per-tensor): g1_alphas and
// g2_alphas registered on the layer, and the inverse input scales in the quant config.
// trtllm_fp8_moe.py TrtLlmFp8ExpertsMonolithic: _g1_alphas, _g2_alphas, _g1_scale_c.
TEST(LoaderFacts, Fp8PerTensorAlphas) {
  LoaderQuery q = layer("Qwen3MoeForCausalLM", "model.layers.0.mlp.experts", "fp8", "FLASHINFER_CUTLASS");
  q.per_tensor = true;
  auto facts = load_time_tensors(q);
  EXPECT_EQ(names(facts), (std::vector<std::string>{"g1_alphas", "g2_alphas", "a1_gscale", "a2_gscale"}));
  EXPECT_EQ(find(facts, "g1_alphas")->holder, Holder::parameter);
  EXPECT_EQ(find(facts, "g1_alphas")->written_as, "g1_alphas");
  EXPECT_EQ(find(facts, "g2_alphas")->value, "w2_weight_scale * w2_input_scale");
  // HPC registers the same Parameters; the artifact does not carry them (checkpoint layout).
  LoaderQuery hpc = q;
  hpc.backend = "HPC";
  auto h = load_time_tensors(hpc);
  EXPECT_EQ(names(h), (std::vector<std::string>{"g1_alphas", "g2_alphas", "a1_gscale", "a2_gscale"}));
  EXPECT_EQ(find(h, "g1_alphas")->written_as, "");
  q.per_tensor = false;  // block FP8: nothing
  EXPECT_TRUE(load_time_tensors(q).empty());

  LoaderQuery trt = layer("Qwen3MoeForCausalLM", "model.layers.0.mlp.experts", "fp8", "FLASHINFER_TRTLLM");
  trt.per_tensor = true;
  trt.experts_class = "TrtLlmFp8ExpertsMonolithic";
  auto t = load_time_tensors(trt);
  EXPECT_EQ(names(t), (std::vector<std::string>{"_g1_alphas", "_g2_alphas", "_g1_scale_c"}));
  EXPECT_EQ(find(t, "_g1_scale_c")->value, "_g1_alphas / w2_input_scale");
  EXPECT_EQ(find(t, "_g1_scale_c")->written_as, "");
  trt.gated = false;
  EXPECT_EQ(find(load_time_tensors(trt), "_g1_scale_c")->value, "ones_like(_g1_alphas) / w2_input_scale");
  trt.experts_class = "TrtLlmFp8ExpertsModular";
  EXPECT_TRUE(load_time_tensors(trt).empty());
}

// cutlass_moe.py CutlassExpertsFp8Base: int64 strides per local expert, K = hidden,
// N = intermediate per partition; TritonOrCutlassExperts keeps the CUTLASS experts as `.experts`.
TEST(LoaderFacts, CutlassStrides) {
  LoaderQuery q = layer("Qwen3MoeForCausalLM", "model.layers.0.mlp.experts", "fp8", "VLLM_CUTLASS", 6);
  q.experts_class = "TritonOrCutlassExperts";
  auto facts = load_time_tensors(q);
  EXPECT_EQ(names(facts), (std::vector<std::string>{"ab_strides1", "ab_strides2", "c_strides1", "c_strides2"}));
  EXPECT_EQ(find(facts, "ab_strides1")->value, "full(256)");
  EXPECT_EQ(find(facts, "ab_strides2")->value, "full(128)");
  EXPECT_EQ(find(facts, "c_strides1")->value, "full(256)");  // 2 * 128
  EXPECT_EQ(find(facts, "ab_strides1")->dtype, "I64");
  EXPECT_EQ(find(facts, "ab_strides1")->shape, (std::vector<int64_t>{6}));
  EXPECT_EQ(find(facts, "ab_strides1")->path, "quant_method.moe_kernel.fused_experts.experts.ab_strides1");
  q.backend = "BATCHED_VLLM_CUTLASS";
  q.experts_class = "CutlassBatchedExpertsFp8";
  EXPECT_EQ(find(load_time_tensors(q), "ab_strides1")->path, "quant_method.moe_kernel.fused_experts.ab_strides1");

  // CutlassExpertsW4A8Fp8: the same leading dimensions and the [E, 2] scale strides.
  LoaderQuery w = layer("Qwen3MoeForCausalLM", "model.layers.0.mlp.experts", "w4a8", "CUTLASS", 4);
  auto wf = load_time_tensors(w);
  EXPECT_EQ(names(wf), (std::vector<std::string>{"a_strides1", "a_strides2", "c_strides1", "c_strides2", "s_strides1", "s_strides2", "b_strides1", "b_strides2"}));
  EXPECT_EQ(find(wf, "s_strides1")->shape, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(find(wf, "s_strides1")->value, "rows (256, 0)");
  EXPECT_EQ(find(wf, "s_strides2")->value, "rows (256, 0)");
  EXPECT_EQ(find(wf, "b_strides1")->path, "quant_method.b_strides1");
  EXPECT_EQ(find(wf, "b_strides1")->dtype, "I32");  // an int32 copy of a CuTe layout object
  EXPECT_TRUE(find(wf, "b_strides2")->shape.empty());
}

TEST(LoaderFacts, BackendsThatMakeNothing) {
  for (const auto& [family, backend] : std::vector<std::pair<std::string, std::string>>{{"mxfp4", "TRITON"},
                                                                                         {"mxfp4", "MARLIN"},
                                                                                         {"mxfp4", "CPU"},
                                                                                         {"mxfp4", "XPU"},
                                                                                         {"mxfp4", "EMULATION"},
                                                                                         {"nvfp4", "MARLIN"},
                                                                                         {"nvfp4", "EMULATION"},
                                                                                         {"fp8", "TRITON"},
                                                                                         {"fp8", "DEEPGEMM"},
                                                                                         {"fp8", "MARLIN"},
                                                                                         {"wna16", "MARLIN"},
                                                                                         {"wna16", "CPU"},
                                                                                         {"int8", "TRITON"},
                                                                                         {"unquantized", "TRITON"},
                                                                                         {"unquantized", "CPU"},
                                                                                         {"unquantized", "FLASHINFER_TRTLLM"}}) {
    LoaderQuery q = layer("Qwen3MoeForCausalLM", "model.layers.0.mlp.experts", family, backend);
    EXPECT_TRUE(load_time_tensors(q).empty()) << family << " " << backend;
    EXPECT_TRUE(param_flags(q).empty()) << family << " " << backend;
  }
}

// ---- 3. Flags ------------------------------------------------------------------------------

// is_shuffled = True on the weights AITER's shuffles return: oracle/unquantized.py (AITER),
// oracle/fp8.py (AITER, AITER_MXFP8), oracle/mxfp4.py (AITER_MXFP4_MXFP4, AITER_MXFP4_BF16).
TEST(LoaderFacts, IsShuffledOnAiterWeights) {
  auto flags_of = [](const std::string& family, const std::string& backend, const std::string& method = "", const std::string& device = "gfx950") {
    LoaderQuery q = layer("Qwen3MoeForCausalLM", "model.layers.0.mlp.experts", family, backend);
    q.method_class = method;
    q.device = device;
    return param_flags(q);
  };
  for (const auto& f : {flags_of("unquantized", "AITER"), flags_of("fp8", "AITER"), flags_of("mxfp8", "AITER_MXFP8"), flags_of("mxfp4", "AITER_MXFP4_MXFP4"),
                        flags_of("mxfp4", "AITER_MXFP4_BF16", "GptOssMxfp4MoEMethod"), flags_of("mxfp4", "AITER_MXFP4_BF16", "Mxfp4MoEMethod")}) {
    ASSERT_EQ(f.size(), 2u);
    EXPECT_EQ(f[0].role, "w13_weight");
    EXPECT_EQ(f[1].role, "w2_weight");
    for (const ParamFlag& g : f) {
      EXPECT_EQ(g.attribute, "is_shuffled");
      EXPECT_EQ(g.value, "True");
      EXPECT_NE(g.read_by.find("aiter"), std::string::npos);
    }
  }
  // The triton_kernels format (gfx1250, Mxfp4MoEMethod) and AITER_MXFP4_FP8 set none, nor any
  // TRT-LLM backend at the reference.
  EXPECT_TRUE(flags_of("mxfp4", "AITER_MXFP4_BF16", "Mxfp4MoEMethod", "gfx1250").empty());
  EXPECT_EQ(flags_of("mxfp4", "AITER_MXFP4_BF16", "GptOssMxfp4MoEMethod", "gfx1250").size(), 2u);
  EXPECT_TRUE(flags_of("mxfp4", "AITER_MXFP4_FP8").empty());
  EXPECT_TRUE(flags_of("fp8", "FLASHINFER_TRTLLM", "", "sm100").empty());
  EXPECT_TRUE(flags_of("nvfp4", "FLASHINFER_TRTLLM", "", "sm100").empty());
  EXPECT_TRUE(flags_of("mxfp4", "FLASHINFER_TRTLLM_MXFP4_BF16", "GptOssMxfp4MoEMethod", "sm100").empty());
}

// ---- 4. The manifest form --------------------------------------------------------------------

TEST(LoaderFacts, JsonForTheManifest) {
  LoaderQuery q = layer("Qwen3MoeForCausalLM", "model.layers.0.mlp.experts", "nvfp4", "FLASHINFER_B12X", 2);
  EXPECT_EQ(place_json(*vllm_param_place(q, "w13_weight")).dump(),
            R"({"path":"model.layers.0.mlp.experts.routed_experts.w13_weight","holder":"parameter"})");
  auto facts = load_time_tensors(q);
  auto j = run_fact_json(facts[0]);
  EXPECT_EQ(j["name"], "_fc2_input_scale");
  EXPECT_EQ(j["shape"].dump(), "[2]");
  EXPECT_EQ(j["written_as"], "fc2_input_scale");
  EXPECT_TRUE(j["view_of"].is_null());
  EXPECT_EQ(run_fact_json(facts[1])["view_of"], "w13_weight_scale");
  EXPECT_TRUE(run_fact_json(facts[1])["shape"].is_null());

  LoaderQuery aiter = layer("Qwen3MoeForCausalLM", "model.layers.0.mlp.experts", "unquantized", "AITER");
  EXPECT_EQ(flags_json(param_flags(aiter), "w2_weight").dump(), R"({"is_shuffled":true})");
  EXPECT_EQ(flags_json(param_flags(aiter), "w13_bias").dump(), "{}");
}

// ---- 5. Every shipped sample ---------------------------------------------------------------

// Every sample's architecture is known, and every role the oracle plans on a few targets gets a
// place under the experts module: a Parameter at <module>.routed_experts.<role>, or one of the
// backend exceptions.
TEST(LoaderFacts, EverySampleRoleHasAPlace) {
  const fs::path samples = fs::path(test::source_dir()) / "samples";
  std::set<std::string> architectures;
  int layers_seen = 0;
  for (const auto& entry : fs::directory_iterator(samples)) {
    if (!entry.is_directory() || !fs::exists(entry.path() / "config.json")) continue;
    ckpt::Checkpoint ck = ckpt::open_checkpoint(entry.path().string());
    for (const std::string target : {"sm90", "sm100", "gfx950", "cpu-amx"}) {
      oracle::Deployment dep = oracle::default_deployment(oracle::parse_target(target));
      for (const LayerDecision& d : decide_layers(ck, dep)) {
        if (!d.decision.ok() || !d.decision.backend) continue;
        LoaderQuery q;
        q.architecture = d.query.architecture;
        q.checkpoint_expert_prefix = d.layer->prefix;
        q.family = oracle::family_name(d.decision.family);
        q.backend = *d.decision.backend;
        q.experts_class = d.decision.experts_class.value_or("");
        q.method_class = d.decision.method_class;
        q.device = target;
        q.num_local_experts = d.decision.num_local_experts;
        architectures.insert(q.architecture);
        auto module = vllm_moe_module_path(q.architecture, q.checkpoint_expert_prefix);
        ASSERT_TRUE(module) << entry.path().filename() << ": " << q.architecture;
        ++layers_seen;
        for (const auto& [role, layout] : d.decision.tensor_layouts) {
          if (layout == "dropped") continue;  // vLLM sets it to None; the artifact does not write it
          auto place = vllm_param_place(q, role);
          ASSERT_TRUE(place) << role;
          EXPECT_EQ(place->path.rfind(*module + ".routed_experts.", 0), 0u) << place->path;
          if (place->holder == Holder::parameter) {
            EXPECT_EQ(place->path, *module + ".routed_experts." + role);
          }
        }
        for (const RunFact& f : load_time_tensors(q)) {
          EXPECT_FALSE(f.upstream.empty()) << f.name;
          if (!f.shape.empty()) {
            EXPECT_EQ(f.shape[0], q.num_local_experts) << f.name;
          }
        }
      }
    }
  }
  EXPECT_GT(layers_seen, 0);
  // The shipped samples cover every model family moepack reads.
  for (const char* a : {"GptOssForCausalLM", "MixtralForCausalLM", "Qwen3MoeForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM",
                        "Llama4ForConditionalGeneration", "NemotronHForCausalLM"})
    EXPECT_TRUE(architectures.count(a)) << a;
  for (const std::string& a : architectures) {
    auto known = known_architectures();
    EXPECT_NE(std::find(known.begin(), known.end(), a), known.end()) << a;
  }
}

}  // namespace
}  // namespace moepack::convert
