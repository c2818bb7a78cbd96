// Loader facts: where vLLM e9d1398d9 keeps each tensor of a MoE layer, the tensors it makes at
// load time, and the parameter flags that select a kernel path. See loader_facts.h and
// docs/ARTIFACT.md ("Loading into vLLM"). Every rule names the upstream file it was read from;
// paths below are vllm-project/vllm @ e9d1398d9 unless said otherwise.
#include "lib/convert/loader_facts.h"

#include <algorithm>
#include <cstdio>
#include <span>

namespace moepack::convert {
namespace {

// ---- 1. The experts module of each model class --------------------------------------------

// How a model class turns the checkpoint's expert prefix into the path of the module its MoE
// block builds. `from` -> `to` is a leading-string rename (vLLM's WeightsMapper
// orig_to_new_prefix, or a class's own renaming); empty `from` keeps the prefix. A prefix that
// already starts with `to` is kept (the checkpoint was written under vLLM's names).
struct ArchRule {
  const char* architecture;
  const char* from;
  const char* to;
  const char* upstream;
};

constexpr ArchRule kArchRules[] = {
    // TransformerBlock.mlp = MLPBlock(prefix=f"{prefix}.mlp"); MLPBlock.experts =
    // FusedMoEFactory(prefix=f"{prefix}.experts"). hf_to_vllm_mapper renames only suffixes
    // (gate_up_proj_blocks -> w13_weight, ...), and the loaders go through
    // remap_moe_expert_weights, which inserts `routed_experts.`.
    {"GptOssForCausalLM", "", "", "vllm/model_executor/models/gpt_oss.py (MLPBlock, GptOssForCausalLM.hf_to_vllm_mapper, _load_weights_*)"},
    // MixtralDecoderLayer.block_sparse_moe = MixtralMoE(...); MixtralMoE.experts =
    // FusedMoEFactory(prefix=f"{prefix}.experts", ckpt_names=("w1", "w2", "w3")).
    {"MixtralForCausalLM", "", "", "vllm/model_executor/models/mixtral.py (MixtralMoE.experts, MixtralDecoderLayer.block_sparse_moe)"},
    // Qwen3MoeSparseMoeBlock.experts = FusedMoEFactory(prefix=f"{prefix}.experts"), under
    // Qwen3MoeDecoderLayer.mlp; the mapper's orig_to_new_stacked touches only .mlp.gate_proj /
    // .mlp.up_proj of dense MLPs (".experts.gate_up_proj must be handled by MoERunner.load_weights").
    {"Qwen3MoeForCausalLM", "", "", "vllm/model_executor/models/qwen3_moe.py (Qwen3MoeSparseMoeBlock.experts, Qwen3MoeModel.hf_to_vllm_mapper)"},
    {"Qwen2MoeForCausalLM", "", "", "vllm/model_executor/models/qwen2_moe.py (Qwen2MoeSparseMoeBlock.experts, Qwen2MoeForCausalLM.hf_to_vllm_mapper)"},
    // DeepseekV2MoE.experts = FusedMoEFactory(prefix=f"{prefix}.experts") under
    // DeepseekV2DecoderLayer.mlp; load_weights maps `experts.<E>.gate_proj.` to
    // `experts.routed_experts.w13_` (fused_moe_make_expert_params_mapping).
    {"DeepseekV2ForCausalLM", "", "", "vllm/model_executor/models/deepseek_v2.py (DeepseekV2MoE.experts, DeepseekV2Model.load_weights)"},
    {"DeepseekV3ForCausalLM", "", "", "vllm/model_executor/models/deepseek_v2.py (DeepseekV3ForCausalLM(DeepseekV2ForCausalLM))"},
    {"DeepseekV32ForCausalLM", "", "", "vllm/models/deepseek_v32/nvidia/model.py (mlp = DeepseekV2MoE; DeepseekV32ForCausalLM(DeepseekV2ForCausalLM))"},
    {"GlmMoeDsaForCausalLM", "", "", "vllm/model_executor/models/deepseek_v2.py (GlmMoeDsaForCausalLM(DeepseekV2ForCausalLM))"},
    // The checkpoint names layers without `model.`: _make_deepseek_v4_weights_mapper's
    // orig_to_new_prefix maps "layers." -> "model.layers."; DeepseekV4DecoderLayer.ffn =
    // DeepseekV4MoE(prefix=f"{prefix}.ffn"), whose experts = FusedMoEFactory(prefix=f"{prefix}.experts")
    // (not with --moe-backend deep_gemm_mega_moe, which builds DeepseekV4MegaMoEExperts instead).
    {"DeepseekV4ForCausalLM", "layers.", "model.layers.",
     "vllm/models/deepseek_v4/nvidia/model.py and amd/model.py (_make_deepseek_v4_weights_mapper, DeepseekV4MoE._init_fused_moe_experts)"},
    // Llama4ForConditionalGeneration.language_model = Llama4ForCausalLM(prefix="language_model");
    // Llama4DecoderLayer.feed_forward = Llama4MoE(...); Llama4MoE.experts = FusedMoEFactory(...).
    // ModelOpt exports name the text model `model.`: _rename_weight_for_modelopt_checkpoint
    // maps "model." -> "language_model.model.".
    {"Llama4ForConditionalGeneration", "model.", "language_model.model.",
     "vllm/model_executor/models/mllama4.py (language_model, _rename_weight_for_modelopt_checkpoint); llama4.py (Llama4MoE.experts)"},
    {"Llama4ForCausalLM", "", "", "vllm/model_executor/models/llama4.py (Llama4MoE.experts, Llama4DecoderLayer.feed_forward)"},
    // hf_to_vllm_mapper orig_to_new_prefix {"backbone": "model"}; the MoE mixer is
    // NemotronHMoE(prefix=f"{prefix}.mixer") with experts = FusedMoEFactory(prefix=f"{prefix}.experts").
    {"NemotronHForCausalLM", "backbone.", "model.", "vllm/model_executor/models/nemotron_h.py (NemotronHForCausalLM.hf_to_vllm_mapper, NemotronHMoE.experts)"},
    {"NemotronHPuzzleForCausalLM", "backbone.", "model.", "vllm/model_executor/models/registry.py (-> nemotron_h NemotronHForCausalLM)"},
};

const ArchRule* arch_rule(const std::string& architecture) {
  for (const ArchRule& r : kArchRules)
    if (architecture == r.architecture) return &r;
  return nullptr;
}

constexpr const char* kRoutedExperts =
    "vllm/model_executor/layers/fused_moe/layer.py (FusedMoEFactory returns a MoERunner), runner/moe_runner.py (MoERunner.routed_experts), "
    "routed_experts.py (RoutedExperts: quant_method.create_weights(layer=self))";

// The prefix below the model root every tensor of the layer shares: the runner's path, then
// `base_layer.` with LoRA, then `routed_experts.`.
std::optional<std::string> routed_experts_path(const LoaderQuery& q) {
  auto module = vllm_moe_module_path(q.architecture, q.checkpoint_expert_prefix);
  if (!module) return std::nullopt;
  return *module + (q.lora ? ".base_layer" : "") + ".routed_experts";
}

bool is_one_of(const std::string& s, std::initializer_list<const char*> names) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return s == n; });
}

// ---- 2. Backends that do not keep a role as a Parameter ------------------------------------

// MXFP4 layers whose weights end as triton_kernels tensors: the weights are assigned as plain
// attributes of the layer (`layer.w13_weight = w13`, after `del layer.w13_weight`) and the
// swizzled block scales live in the quant method's PrecisionConfig (`weight_scale`), the
// Parameters deleted.
//   quantization/mxfp4.py GptOssMxfp4MoEMethod._setup_kernel and Mxfp4MoEMethod._setup_kernel
//   ("For TRITON backends, weights are wrapped tensors from triton_kernels"); Mxfp4MoEMethod also
//   for AITER_MXFP4_BF16 on gfx1250 (uses_triton_weight_format); quark/quark_moe.py
//   QuarkOCP_MX_MoEMethod also for AITER_MXFP4_FP8; oracle/mxfp4.py TRITON_BACKENDS =
//   (TRITON, TRITON_UNFUSED) and the `del layer.w13_weight_scale` of its triton branches.
bool triton_weight_format(const LoaderQuery& q) {
  if (q.family != "mxfp4") return false;
  if (is_one_of(q.backend, {"TRITON", "TRITON_UNFUSED"})) return true;
  if (q.backend == "AITER_MXFP4_BF16" && q.device == "gfx1250" && q.method_class == "Mxfp4MoEMethod") return true;
  if (q.backend == "AITER_MXFP4_FP8" && q.method_class == "QuarkOCP_MX_MoEMethod") return true;
  return false;
}
constexpr const char* kTritonFormat =
    "vllm/model_executor/layers/quantization/mxfp4.py (_setup_kernel: layer.w13_weight = w13; self.w13_precision_config = w13_scale), "
    "quark/quark_moe.py (QuarkOCP_MX_MoEMethod), fused_moe/oracle/mxfp4.py (TRITON_BACKENDS; del layer.w13_weight_scale)";

constexpr const char* kB12xFc2 =
    "vllm/model_executor/layers/fused_moe/experts/flashinfer_b12x_moe.py (FlashInferB12xExperts.process_weights_after_loading: self._fc2_input_scale)";

constexpr const char* kExpertsObject = "quant_method.moe_kernel.fused_experts";

// ---- 3. Load-time tensors ------------------------------------------------------------------

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos && s.find("inf") == std::string::npos && s.find("nan") == std::string::npos) s += ".0";
  return s;
}

RunFact per_expert(const LoaderQuery& q, std::string name, std::string dtype, std::string value, Holder holder, std::string path, std::string written_as,
                   std::string upstream) {
  return RunFact{std::move(name), std::move(dtype), {q.num_local_experts}, "[num_local_experts]", std::move(value), holder, std::move(path), std::move(written_as), "",
                 std::move(upstream)};
}

bool is_situ(const LoaderQuery& q) { return q.activation == "situ"; }

// The SwiGLU parameters the experts kernels expand to one value per local expert (torch.full /
// torch.tensor([v] * E), float32), from the values the MoE method passes in its quant config:
// the model's swiglu_limit / swiglu_alpha / swiglu_beta, except GptOssMxfp4MoEMethod, which
// passes the constants gemm1_alpha=1.702, gemm1_beta=1.0, swiglu_limit=7.0
// (quantization/mxfp4.py GptOssMxfp4MoEMethod.get_fused_moe_quant_config), and
// Mxfp4MoEMethod, which passes the limit only.
struct Swiglu {
  std::optional<double> limit, alpha, beta;
};
// The values the layer itself holds (RoutedExperts.swiglu_*, FusedMoEConfig.swiglu_*): what the
// model class passes to FusedMoEFactory. gpt_oss.py MLPBlock passes none (its clamp of 7 lives in
// the swigluoai activation and in GptOssMxfp4MoEMethod's constants), so a manifest's
// swiglu_limit 7.0 for gpt-oss is not a layer value.
Swiglu layer_swiglu(const LoaderQuery& q) {
  if (q.architecture == "GptOssForCausalLM") return {};
  return {q.swiglu_limit, q.swiglu_alpha, q.swiglu_beta};
}
Swiglu method_swiglu(const LoaderQuery& q) {
  if (q.method_class == "GptOssMxfp4MoEMethod") return {7.0, 1.702, 1.0};
  if (q.method_class == "Mxfp4MoEMethod") return {layer_swiglu(q).limit, std::nullopt, std::nullopt};
  return layer_swiglu(q);
}

void add_swiglu(std::vector<RunFact>& out, const LoaderQuery& q, const Swiglu& s, const char* upstream) {
  const std::string path = std::string(kExpertsObject) + ".";
  if (s.limit) out.push_back(per_expert(q, "gemm1_clamp_limit", "F32", "full(" + number(*s.limit) + ")", Holder::kernel_attribute, path + "gemm1_clamp_limit", "", upstream));
  if (s.alpha) out.push_back(per_expert(q, "gemm1_alpha", "F32", "full(" + number(*s.alpha) + ")", Holder::kernel_attribute, path + "gemm1_alpha", "", upstream));
  if (s.beta) out.push_back(per_expert(q, "gemm1_beta", "F32", "full(" + number(*s.beta) + ")", Holder::kernel_attribute, path + "gemm1_beta", "", upstream));
}

// The inverse input scales NVFP4 and per-tensor FP8 quant configs carry (a1_gscale, a2_gscale):
// new tensors, the shape of the input-scale parameter they invert.
void add_inverse_input_scales(std::vector<RunFact>& out, const char* upstream) {
  out.push_back(RunFact{"a1_gscale", "F32", {}, "shape of w13_input_scale", "1 / w13_input_scale", Holder::kernel_attribute, "quant_method.moe_quant_config.a1_gscale", "", "",
                        upstream});
  out.push_back(RunFact{"a2_gscale", "F32", {}, "shape of w2_input_scale", "1 / w2_input_scale", Holder::kernel_attribute, "quant_method.moe_quant_config.a2_gscale", "", "",
                        upstream});
}

constexpr const char* kNvfp4Config = "vllm/model_executor/layers/fused_moe/oracle/nvfp4.py (make_nvfp4_moe_quant_config: a1_gscale=(1.0 / a13_scale), a2_gscale=(1.0 / a2_scale))";
constexpr const char* kTrtNvfp4 = "vllm/model_executor/layers/fused_moe/experts/trtllm_nvfp4_moe.py (TrtLlmNvFp4ExpertsBase.__init__, process_weights_after_loading)";
constexpr const char* kFiCutlass = "vllm/model_executor/layers/fused_moe/experts/flashinfer_cutlass_moe.py (FlashInferExperts.__init__: _per_expert, fake_input_scale)";
constexpr const char* kTrtMxfp4 = "vllm/model_executor/layers/fused_moe/experts/trtllm_mxfp4_moe.py (TrtLlmMxfp4ExpertsBase.__init__)";
constexpr const char* kTrtFp8 = "vllm/model_executor/layers/fused_moe/experts/trtllm_fp8_moe.py (TrtLlmFp8ExpertsBase.__init__, TrtLlmFp8ExpertsMonolithic.__init__)";
constexpr const char* kFp8Config = "vllm/model_executor/layers/fused_moe/oracle/fp8.py (make_fp8_moe_quant_config: FLASHINFER_CUTLASS / HPC per-tensor)";
constexpr const char* kCutlassFp8 = "vllm/model_executor/layers/fused_moe/experts/cutlass_moe.py (CutlassExpertsFp8Base.__init__)";
constexpr const char* kCutlassW4a8 = "vllm/model_executor/layers/fused_moe/experts/cutlass_moe.py (CutlassExpertsW4A8Fp8.__init__); oracle/w4a8.py (b_strides1/2)";

void nvfp4_tensors(std::vector<RunFact>& out, const LoaderQuery& q) {
  const std::string& b = q.backend;
  if (b == "FLASHINFER_TRTLLM") {
    // g1_scale_c = g1_alphas * a2_gscale (gated, not SiTU) or a2_gscale.clone(), after
    // process_weights_after_loading folds the input scale into w13_weight_scale_2 (g1_alphas);
    // registered on the layer so EPLB moves it with the experts.
    const bool fold = q.gated && !is_situ(q);
    out.push_back(per_expert(q, "g1_scale_c", "F32", fold ? "w13_weight_scale_2 * w13_input_scale * (1 / w2_input_scale)" : "1 / w2_input_scale", Holder::parameter,
                             "g1_scale_c", "g1_scale_c", kTrtNvfp4));
    // The per-expert SwiGLU tensors (moe_config's values when the quant config has none),
    // registered as Parameters: the clamp and beta divided by g1_alphas, alpha as is; SiTU maps
    // its beta -> gemm1_alpha and linear beta -> gemm1_beta, unfolded; none without a gate.
    const Swiglu sw = layer_swiglu(q);
    if (q.gated) {
      if (is_situ(q)) {
        if (q.situ_beta) out.push_back(per_expert(q, "gemm1_alpha", "F32", "full(" + number(*q.situ_beta) + ")", Holder::parameter, "gemm1_alpha", "", kTrtNvfp4));
        if (q.situ_linear_beta)
          out.push_back(per_expert(q, "gemm1_beta", "F32", "full(" + number(*q.situ_linear_beta) + ")", Holder::parameter, "gemm1_beta", "", kTrtNvfp4));
      } else {
        if (sw.limit)
          out.push_back(per_expert(q, "gemm1_clamp_limit", "F32", "full(" + number(*sw.limit) + ") / (w13_weight_scale_2 * w13_input_scale)", Holder::parameter,
                                   "gemm1_clamp_limit", "gemm1_clamp_limit", kTrtNvfp4));
        if (sw.beta)
          out.push_back(per_expert(q, "gemm1_beta", "F32", "full(" + number(*sw.beta) + ") / (w13_weight_scale_2 * w13_input_scale)", Holder::parameter, "gemm1_beta",
                                   "gemm1_beta", kTrtNvfp4));
        if (sw.alpha)
          out.push_back(per_expert(q, "gemm1_alpha", "F32", "full(" + number(*sw.alpha) + ")", Holder::parameter, "gemm1_alpha", "", kTrtNvfp4));
      }
    }
    add_inverse_input_scales(out, kNvfp4Config);
    return;
  }
  if (b == "FLASHINFER_B12X") {
    // W4A16 checkpoints: torch.ones(num_local_experts, float32); static checkpoints: the quant
    // config's a2_gscale filled with 1.0 in place. Either way ones, held on the experts object.
    out.push_back(per_expert(q, "_fc2_input_scale", "F32", "ones", Holder::kernel_attribute, std::string(kExpertsObject) + "._fc2_input_scale", "fc2_input_scale", kB12xFc2));
    // The block scales in CuteDSL's MMA layout, made once: flashinfer.cute_dsl.utils
    // convert_sf_to_mma_layout (flashinfer v0.6.17) of the scales reshaped [E * M, K / 16] is
    // view(E, m_tiles, k_tiles, 32, 4, 4).permute(3, 4, 1, 5, 2, 0), a strided view of the same
    // storage: no bytes of its own.
    for (const char* proj : {"w1", "w2"}) {
      const std::string role = std::string(proj) == "w1" ? "w13_weight_scale" : "w2_weight_scale";
      out.push_back(RunFact{std::string(proj) + "_sf_mma", "F8_E4M3", {}, "(32, 4, ceil(M / 128), 4, ceil(K / 64), num_local_experts), strided",
                            "view(E, ceil(M / 128), ceil(K / 64), 32, 4, 4).permute(3, 4, 1, 5, 2, 0) of " + role, Holder::kernel_attribute,
                            std::string(kExpertsObject) + "." + proj + "_sf_mma", "", role,
                            "vllm/model_executor/layers/fused_moe/experts/flashinfer_b12x_moe.py (w1_sf_mma, w2_sf_mma); flashinfer v0.6.17 "
                            "flashinfer/cute_dsl/utils.py (convert_sf_to_mma_layout)"});
    }
    return;
  }
  if (b == "FLASHINFER_CUTLASS") {
    add_swiglu(out, q, method_swiglu(q), kFiCutlass);
    add_inverse_input_scales(out, kNvfp4Config);
    return;
  }
  if (is_one_of(b, {"VLLM_CUTLASS", "FLASHINFER_CUTEDSL", "FLASHINFER_CUTEDSL_BATCHED"})) add_inverse_input_scales(out, kNvfp4Config);
}

void mxfp4_tensors(std::vector<RunFact>& out, const LoaderQuery& q) {
  const std::string& b = q.backend;
  if (is_one_of(b, {"FLASHINFER_TRTLLM_MXFP4_BF16", "FLASHINFER_TRTLLM_MXFP4_MXFP8"})) {
    Swiglu s = method_swiglu(q);
    if (is_situ(q)) s = {std::nullopt, q.situ_beta, q.situ_linear_beta};
    add_swiglu(out, q, s, kTrtMxfp4);
    return;
  }
  if (is_one_of(b, {"FLASHINFER_CUTLASS_MXFP4_BF16", "FLASHINFER_CUTLASS_MXFP4_MXFP8"})) {
    add_swiglu(out, q, method_swiglu(q), kFiCutlass);
    if (b == "FLASHINFER_CUTLASS_MXFP4_MXFP8")
      out.push_back(per_expert(q, "fake_input_scale", "F32", "ones", Holder::kernel_attribute, std::string(kExpertsObject) + ".fake_input_scale", "", kFiCutlass));
  }
}

void fp8_tensors(std::vector<RunFact>& out, const LoaderQuery& q) {
  const std::string& b = q.backend;
  if (is_one_of(b, {"FLASHINFER_CUTLASS", "HPC"}) && q.per_tensor) {
    // Registered on the layer: g1_alphas = w1_scale * a1_scale, g2_alphas = w2_scale * a2_scale.
    // The artifact carries them for FlashInfer CUTLASS (family_fp8.cpp fp8_flashinfer_roles), not
    // for HPC (its checkpoint-layout roles).
    const bool written = b == "FLASHINFER_CUTLASS";
    out.push_back(per_expert(q, "g1_alphas", "F32", "w13_weight_scale * w13_input_scale", Holder::parameter, "g1_alphas", written ? "g1_alphas" : "", kFp8Config));
    out.push_back(per_expert(q, "g2_alphas", "F32", "w2_weight_scale * w2_input_scale", Holder::parameter, "g2_alphas", written ? "g2_alphas" : "", kFp8Config));
    add_inverse_input_scales(out, kFp8Config);
  }
  if (b == "FLASHINFER_CUTLASS") add_swiglu(out, q, method_swiglu(q), kFiCutlass);
  if (b == "FLASHINFER_TRTLLM") {
    if (q.experts_class == "TrtLlmFp8ExpertsMonolithic" && q.per_tensor) {
      const std::string path = std::string(kExpertsObject) + ".";
      out.push_back(per_expert(q, "_g1_alphas", "F32", "(w13_weight_scale * w13_input_scale).squeeze()", Holder::kernel_attribute, path + "_g1_alphas", "", kTrtFp8));
      out.push_back(per_expert(q, "_g2_alphas", "F32", "(w2_weight_scale * w2_input_scale).squeeze()", Holder::kernel_attribute, path + "_g2_alphas", "", kTrtFp8));
      out.push_back(per_expert(q, "_g1_scale_c", "F32", q.gated ? "_g1_alphas / w2_input_scale" : "ones_like(_g1_alphas) / w2_input_scale", Holder::kernel_attribute,
                               path + "_g1_scale_c", "", kTrtFp8));
    }
    add_swiglu(out, q, method_swiglu(q), kTrtFp8);
  }
  if (is_one_of(b, {"VLLM_CUTLASS", "BATCHED_VLLM_CUTLASS"})) {
    // int64 leading dimensions per local expert: K = hidden, N = intermediate per partition.
    const std::string k = std::to_string(q.hidden_size), n = std::to_string(q.intermediate_size), n2 = std::to_string(2 * q.intermediate_size);
    // TritonOrCutlassExperts (a FallbackExperts) keeps the CUTLASS experts as `.experts`.
    const std::string path = std::string(kExpertsObject) + (q.experts_class == "TritonOrCutlassExperts" ? ".experts." : ".");
    out.push_back(per_expert(q, "ab_strides1", "I64", "full(" + k + ")", Holder::kernel_attribute, path + "ab_strides1", "", kCutlassFp8));
    out.push_back(per_expert(q, "ab_strides2", "I64", "full(" + n + ")", Holder::kernel_attribute, path + "ab_strides2", "", kCutlassFp8));
    out.push_back(per_expert(q, "c_strides1", "I64", "full(" + n2 + ")", Holder::kernel_attribute, path + "c_strides1", "", kCutlassFp8));
    out.push_back(per_expert(q, "c_strides2", "I64", "full(" + k + ") (the ab_strides1 tensor)", Holder::kernel_attribute, path + "c_strides2", "", kCutlassFp8));
  }
}

void w4a8_tensors(std::vector<RunFact>& out, const LoaderQuery& q) {
  if (q.backend != "CUTLASS") return;
  const std::string k = std::to_string(q.hidden_size), n = std::to_string(q.intermediate_size), n2 = std::to_string(2 * q.intermediate_size);
  const std::string path = std::string(kExpertsObject) + ".";
  out.push_back(per_expert(q, "a_strides1", "I64", "full(" + k + ")", Holder::kernel_attribute, path + "a_strides1", "", kCutlassW4a8));
  out.push_back(per_expert(q, "a_strides2", "I64", "full(" + n + ")", Holder::kernel_attribute, path + "a_strides2", "", kCutlassW4a8));
  out.push_back(per_expert(q, "c_strides1", "I64", "full(" + n2 + ")", Holder::kernel_attribute, path + "c_strides1", "", kCutlassW4a8));
  out.push_back(per_expert(q, "c_strides2", "I64", "full(" + k + ") (the a_strides1 tensor)", Holder::kernel_attribute, path + "c_strides2", "", kCutlassW4a8));
  out.push_back(RunFact{"s_strides1", "I64", {q.num_local_experts, 2}, "[num_local_experts, 2]", "rows (" + n2 + ", 0)", Holder::kernel_attribute, path + "s_strides1", "", "", kCutlassW4a8});
  out.push_back(RunFact{"s_strides2", "I64", {q.num_local_experts, 2}, "[num_local_experts, 2]", "rows (" + k + ", 0)", Holder::kernel_attribute, path + "s_strides2", "", "", kCutlassW4a8});
  // ops.cutlass_encode_and_reorder_int4b_grouped (csrc/libtorch_stable/quantization/cutlass_w4a8/
  // w4a8_grouped_mm_entry.cu) returns, beside the encoded weights, an int32 tensor
  // [E, sizeof(LayoutB_Reordered) / 4] holding the bytes of one CuTe layout object
  // (tile_to_shape(LayoutAtomQuant, (N, K, 1)) of that projection), the same for every expert.
  for (const char* proj : {"1", "2"}) {
    const std::string weight = std::string(proj) == "1" ? "w13_weight_packed" : "w2_weight_packed";
    out.push_back(RunFact{std::string("b_strides") + proj, "I32", {}, "[num_local_experts, sizeof(LayoutB_Reordered) / 4]",
                          "the bytes of CUTLASS's reordered int4 layout (LayoutB_Reordered) for " + weight + "'s (N, K), per expert", Holder::kernel_attribute,
                          std::string("quant_method.b_strides") + proj, "", "",
                          std::string(kCutlassW4a8) + "; csrc/libtorch_stable/quantization/cutlass_w4a8/w4a8_grouped_mm_entry.cu (encode_and_reorder_int4b)"});
  }
}

void unquantized_tensors(std::vector<RunFact>& out, const LoaderQuery& q) {
  // UnquantizedFusedMoEMethod passes the layer's swiglu_limit / alpha / beta to the FlashInfer
  // quant configs (unquantized_fused_moe_method.py, "receives gemm1_clamp_limit/alpha/beta").
  if (q.backend == "FLASHINFER_CUTLASS") add_swiglu(out, q, method_swiglu(q), kFiCutlass);
}

// ---- 4. Flags ------------------------------------------------------------------------------

constexpr const char* kAiterReads =
    "aiter.fused_moe (ROCm/aiter): picks its kernels for pre-shuffled weights; vLLM only sets it (replace_parameter carries it to the new Parameter, "
    "vllm/model_executor/utils.py)";

}  // namespace

std::string holder_name(Holder h) {
  switch (h) {
    case Holder::parameter:
      return "parameter";
    case Holder::module_attribute:
      return "module_attribute";
    case Holder::kernel_attribute:
      return "kernel_attribute";
  }
  return "parameter";
}

std::vector<std::string> known_architectures() {
  std::vector<std::string> out;
  for (const ArchRule& r : kArchRules) out.emplace_back(r.architecture);
  return out;
}

std::optional<std::string> vllm_moe_module_path(const std::string& architecture, const std::string& prefix) {
  const ArchRule* r = arch_rule(architecture);
  if (!r || prefix.empty()) return std::nullopt;
  const std::string from = r->from, to = r->to;
  if (from.empty() || prefix.starts_with(to) || !prefix.starts_with(from)) return prefix;
  return to + prefix.substr(from.size());
}

std::optional<ParamPlace> vllm_param_place(const LoaderQuery& q, const std::string& role) {
  auto base = routed_experts_path(q);
  if (!base) return std::nullopt;
  const std::string arch_upstream = arch_rule(q.architecture)->upstream;
  if (triton_weight_format(q)) {
    if (role == "w13_weight" || role == "w2_weight") return ParamPlace{*base + "." + role, Holder::module_attribute, kTritonFormat};
    if (role == "w13_weight_scale") return ParamPlace{*base + ".quant_method.w13_precision_config.weight_scale", Holder::kernel_attribute, kTritonFormat};
    if (role == "w2_weight_scale") return ParamPlace{*base + ".quant_method.w2_precision_config.weight_scale", Holder::kernel_attribute, kTritonFormat};
  }
  if (q.family == "nvfp4" && q.backend == "FLASHINFER_B12X" && role == "fc2_input_scale")
    return ParamPlace{*base + "." + kExpertsObject + "._fc2_input_scale", Holder::kernel_attribute, kB12xFc2};
  return ParamPlace{*base + "." + role, Holder::parameter, arch_upstream + "; " + kRoutedExperts};
}

std::string vllm_param_path(const std::string& architecture, const std::string& prefix, const std::string& role) {
  LoaderQuery q;
  q.architecture = architecture;
  q.checkpoint_expert_prefix = prefix;
  auto place = vllm_param_place(q, role);
  return place ? place->path : std::string();
}

std::vector<RunFact> load_time_tensors(const LoaderQuery& q) {
  std::vector<RunFact> out;
  if (q.family == "nvfp4") nvfp4_tensors(out, q);
  if (q.family == "mxfp4") mxfp4_tensors(out, q);
  // MXFP8 runs FP8's backends (the TRT-LLM FP8 experts class carries its SwiGLU tensors).
  if (q.family == "fp8" || q.family == "mxfp8") fp8_tensors(out, q);
  if (q.family == "w4a8") w4a8_tensors(out, q);
  if (q.family == "unquantized") unquantized_tensors(out, q);
  return out;
}

std::vector<ParamFlag> param_flags(const LoaderQuery& q) {
  // is_shuffled = True on the weights AITER's shuffles return:
  //   unquantized AITER   fused_moe/oracle/unquantized.py (convert_to_unquantized_kernel_format)
  //   FP8 AITER, AITER_MXFP8   fused_moe/oracle/fp8.py (convert_to_fp8_moe_kernel_format)
  //   MXFP4 AITER_MXFP4_MXFP4 (every method), AITER_MXFP4_BF16 (gpt-oss on every ROCm device;
  //   the other methods except on gfx1250, where they take the triton_kernels format)
  //   fused_moe/oracle/mxfp4.py (convert_gpt_oss_weight_to_mxfp4_moe_kernel_format,
  //   convert_weight_to_mxfp4_moe_kernel_format). AITER_MXFP4_FP8 (a triton path) sets none,
  //   nor does any TRT-LLM or other backend at the reference.
  bool shuffled = false;
  const char* upstream = "";
  if (q.family == "unquantized" && q.backend == "AITER") {
    shuffled = true;
    upstream = "vllm/model_executor/layers/fused_moe/oracle/unquantized.py (AITER: rocm_aiter_ops.shuffle_weights, is_shuffled = True)";
  } else if ((q.family == "fp8" || q.family == "mxfp8") && (q.backend == "AITER" || q.backend == "AITER_MXFP8")) {
    shuffled = true;
    upstream = "vllm/model_executor/layers/fused_moe/oracle/fp8.py (AITER / AITER_MXFP8: is_shuffled = True)";
  } else if (q.family == "mxfp4" && q.backend == "AITER_MXFP4_MXFP4") {
    shuffled = true;
    upstream = "vllm/model_executor/layers/fused_moe/oracle/mxfp4.py (AITER_MXFP4_MXFP4: shuffled_w13.is_shuffled = True)";
  } else if (q.family == "mxfp4" && q.backend == "AITER_MXFP4_BF16" && !triton_weight_format(q)) {
    shuffled = true;
    upstream = "vllm/model_executor/layers/fused_moe/oracle/mxfp4.py (AITER_MXFP4_BF16: w13_weight.is_shuffled = True)";
  }
  std::vector<ParamFlag> out;
  if (shuffled)
    for (const char* role : {"w13_weight", "w2_weight"}) out.push_back(ParamFlag{role, "is_shuffled", "True", kAiterReads, upstream});
  return out;
}

nlohmann::ordered_json place_json(const ParamPlace& place) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["path"] = place.path;
  j["holder"] = holder_name(place.holder);
  return j;
}

nlohmann::ordered_json flags_json(const std::vector<ParamFlag>& flags, const std::string& role) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const ParamFlag& f : flags) {
    if (f.role != role) continue;
    if (f.value == "True" || f.value == "False")
      j[f.attribute] = f.value == "True";
    else
      j[f.attribute] = f.value;
  }
  return j;
}

nlohmann::ordered_json run_fact_json(const RunFact& f) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  auto or_null = [](const std::string& s) { return s.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s); };
  j["name"] = f.name;
  j["dtype"] = f.dtype;
  j["shape"] = f.shape.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.shape);
  j["shape_text"] = f.shape_text;
  j["value"] = f.value;
  j["holder"] = holder_name(f.holder);
  j["path"] = f.path;
  j["written_as"] = or_null(f.written_as);
  j["view_of"] = or_null(f.view_of);
  j["upstream"] = f.upstream;
  return j;
}

}  // namespace moepack::convert
