// The families, the released models whose shapes real-shape checkpoints copy, and the model
// layouts: which tensors a decoder of each architecture has, in state-dict order, and its
// config.json (checkpoint-formats.md 3.0-3.2, 3.8, 3.9).
#include <algorithm>
#include <cstring>
#include <memory>
#include <tuple>

#include "lib/core/error.h"
#include "lib/synth/internal.h"
#include "lib/synth/rng.h"

namespace moepack::synth {
namespace {

using json = nlohmann::json;

// ---- tables ------------------------------------------------------------------------------

const std::vector<FamilyDef>& families() {
  static const std::vector<FamilyDef> table = {
      {{"gpt-oss-mxfp4", "gpt_oss", "openai gpt-oss: fused MXFP4 _blocks/_scales, BF16 biases, interleaved gate/up, 0-based shards"}, Scheme::gpt_oss_mxfp4, 32, 3},
      {{"quark-gpt-oss-w-mxfp4-a-fp8", "gpt_oss", "amd-quark gpt-oss export: per-expert gate_up_proj (interleaved) and down_proj, MXFP4, static FP8 input scales, BF16 biases"},
       Scheme::quark_w_mxfp4_a_fp8, 32, 1},
      {{"ct-gpt-oss-mxfp4", "gpt_oss", "llm-compressor gpt-oss: per-expert gate_proj/up_proj/down_proj, compressed-tensors MXFP4, BF16 bias each"},
       Scheme::ct_mxfp4, 32, 1},
      {{"ct-nvfp4", "qwen3_moe", "compressed-tensors nvfp4-pack-quantized W4A4 (weight and input global scales)"}, Scheme::ct_nvfp4, 32, 1},
      {{"ct-nvfp4a16", "qwen3_moe", "compressed-tensors nvfp4-pack-quantized NVFP4A16 (no input global scale)"}, Scheme::ct_nvfp4a16, 32, 1},
      {{"ct-mxfp4", "qwen3_moe", "compressed-tensors mxfp4-pack-quantized (E8M0 scales per 32)"}, Scheme::ct_mxfp4, 32, 1},
      {{"ct-w4a16", "qwen3_moe", "compressed-tensors pack-quantized WNA16 int4 symmetric, group 128"}, Scheme::ct_w4a16, 128, 1},
      {{"ct-w4a16-asym", "qwen3_moe", "compressed-tensors pack-quantized int4 asymmetric with packed zero points, group 128"}, Scheme::ct_w4a16_asym, 128, 1},
      {{"ct-w4a16-actorder", "qwen3_moe", "compressed-tensors pack-quantized int4, actorder group with weight_g_idx"}, Scheme::ct_w4a16_actorder, 128, 1},
      {{"ct-w8a16", "qwen3_moe", "compressed-tensors pack-quantized int8 weights, per channel"}, Scheme::ct_w8a16, 32, 1},
      {{"ct-w4a8-fp8", "qwen3_moe", "compressed-tensors int4 group-128 weights with dynamic per-token FP8 activations"}, Scheme::ct_w4a8_fp8, 128, 1},
      {{"ct-fp8-tensor", "qwen3_moe", "compressed-tensors float-quantized FP8, per-tensor static weights and inputs"}, Scheme::ct_fp8_tensor, 32, 1},
      {{"ct-fp8-channel", "qwen3_moe", "compressed-tensors float-quantized FP8, per-channel weights, dynamic per-token inputs"}, Scheme::ct_fp8_channel, 32, 1},
      {{"ct-fp8-block", "qwen3_moe", "compressed-tensors float-quantized FP8, 128x128 weight blocks, dynamic group-128 inputs"}, Scheme::ct_fp8_block, 32, 1},
      {{"ct-w8a8-int8", "qwen3_moe", "compressed-tensors int-quantized W8A8 int8 (channel weights, dynamic token inputs)"}, Scheme::ct_w8a8_int8, 32, 1},
      {{"ct-w4a8-int8", "qwen3_moe", "compressed-tensors int-quantized W4A8: int4 group-128 values one per I8 byte, dynamic per-token int8 activations"},
       Scheme::ct_w4a8_int8, 128, 1},
      {{"modelopt-nvfp4", "qwen3_moe", "NVIDIA ModelOpt NVFP4 (weight_scale_2 and input_scale 0-d scalars)"}, Scheme::mo_nvfp4, 32, 1},
      {{"modelopt-w4a16-nvfp4", "qwen3_moe", "NVIDIA ModelOpt W4A16_NVFP4 (no input_scale)"}, Scheme::mo_w4a16_nvfp4, 32, 1},
      {{"modelopt-fp8", "qwen3_moe", "NVIDIA ModelOpt FP8 per-tensor (0-d F32 weight_scale and input_scale)"}, Scheme::mo_fp8, 32, 1},
      {{"modelopt-mxfp8", "qwen3_moe", "NVIDIA ModelOpt MXFP8 (E4M3 weights, E8M0 scales per 32)"}, Scheme::mo_mxfp8, 32, 1},
      {{"nemotron-h-nvfp4", "nemotron_h", "Nemotron-H ModelOpt NVFP4: non-gated experts (up_proj, down_proj; relu2), BF16 shared expert"},
       Scheme::mo_nvfp4, 32, 1},
      {{"llama4-fp8", "llama4", "Llama-4 ModelOpt FP8: fused input-major gate_up_proj/down_proj, one F32 scale per tensor for all experts"},
       Scheme::mo_fp8, 32, 1},
      {{"quark-w-mxfp4", "qwen3_moe", "AMD Quark w_mxfp4 (weight-only OCP MXFP4)"}, Scheme::quark_w_mxfp4, 32, 1},
      {{"quark-w-mxfp4-a-fp8", "qwen3_moe", "AMD Quark w_mxfp4_a_fp8 (static per-tensor FP8 input scale)"}, Scheme::quark_w_mxfp4_a_fp8, 32, 1},
      {{"quark-w-mxfp4-a-mxfp4", "qwen3_moe", "AMD Quark w_mxfp4_a_mxfp4 (dynamic MXFP4 activations)"}, Scheme::quark_w_mxfp4_a_mxfp4, 32, 1},
      {{"quark-w-mxfp6-e3m2", "qwen3_moe", "AMD Quark w_mxfp6_e3m2_a_mxfp6_e3m2 (FP6 packed 4 per 3 bytes)"}, Scheme::quark_w_mxfp6_e3m2, 32, 1},
      {{"gptq-int4", "qwen3_moe", "GPTQ 4-bit symmetric group 128, v1 `gptq` format (qzeros store z-1)"}, Scheme::gptq_int4, 128, 1},
      {{"gptq-int4-desc-act", "qwen3_moe", "GPTQ 4-bit group 128 with desc_act (permuted g_idx)"}, Scheme::gptq_int4_desc_act, 128, 1},
      {{"gptq-int8", "qwen3_moe", "GPTQ 8-bit symmetric group 128"}, Scheme::gptq_int8, 128, 1},
      {{"awq-int4", "qwen3_moe", "AutoAWQ GEMM 4-bit group 128 with zero points, AWQ_ORDER nibbles"}, Scheme::awq_int4, 128, 1},
      {{"deepseek-v3-fp8", "deepseek_v3", "DeepSeek-V3 FP8 128x128 blocks (weight_scale_inv), shared experts, first dense layer"}, Scheme::deepseek_fp8_block, 32, 2},
      {{"deepseek-v4-mxfp4", "deepseek_v4", "DeepSeek-V4 native: I8 FP4 experts with F8_E8M0 scales, FP8 shared expert"}, Scheme::deepseek_v4_fp4, 128, 1},
      {{"deepseek-v4-nvfp4", "deepseek_v4", "DeepSeek-V4 native names with ModelOpt NVFP4 experts (moe_quant_algo NVFP4), FP8 shared expert"},
       Scheme::deepseek_v4_nvfp4, 128, 1},
      {{"deepseek-v4-fp8", "deepseek_v4", "DeepSeek-V4 with expert_dtype fp8 (V4-Flash-Base style): FP8 128x128 block experts, F32 scales"},
       Scheme::deepseek_v4_fp8, 128, 1},
      {{"qwen3-moe-bf16", "qwen3_moe", "Qwen3-MoE layout, unquantized BF16"}, Scheme::bf16, 32, 1},
      {{"mixtral-bf16", "mixtral", "Mixtral layout (block_sparse_moe w1/w2/w3), unquantized BF16"}, Scheme::bf16, 32, 1},
      {{"gpt-oss-bf16", "gpt_oss", "gpt-oss unquantized: fused input-major BF16 gate_up_proj (gate/up columns interleaved) and down_proj, biases"},
       Scheme::bf16, 32, 1},
  };
  return table;
}

// Families whose layout is the generic per-expert HF one, so any per-expert model can take them.
bool is_generic_per_expert(const FamilyDef& f) { return f.info.arch == "qwen3_moe" || f.info.arch == "mixtral"; }

struct Preset {
  ModelInfo info;
  SampleDims dims;
};

const std::vector<Preset>& presets() {
  static const std::vector<Preset> table = [] {
    std::vector<Preset> t;
    SampleDims d;
    d = {};
    d.arch = "gpt_oss"; d.hidden = 2880; d.intermediate = 2880; d.experts = 32; d.top_k = 4; d.layers = 24;
    d.vocab = 201088; d.attention = true; d.heads = 64; d.kv_heads = 8; d.head_dim = 64;
    t.push_back({{"gpt-oss-20b", "gpt_oss", "gpt-oss-mxfp4"}, d});
    d.experts = 128; d.layers = 36;
    t.push_back({{"gpt-oss-120b", "gpt_oss", "gpt-oss-mxfp4"}, d});
    d = {};
    d.arch = "qwen3_moe"; d.hidden = 2048; d.intermediate = 768; d.dense_intermediate = 6144; d.experts = 128; d.top_k = 8;
    d.layers = 48; d.vocab = 151936; d.attention = true; d.heads = 32; d.kv_heads = 4; d.head_dim = 128;
    t.push_back({{"qwen3-30b-a3b", "qwen3_moe", "gptq-int4"}, d});
    d = {};
    d.arch = "deepseek_v3"; d.hidden = 7168; d.intermediate = 2048; d.dense_intermediate = 18432; d.experts = 256;
    d.shared_experts = 1; d.top_k = 8; d.layers = 61; d.first_dense = 3; d.vocab = 129280; d.attention = true;
    d.heads = 128; d.kv_heads = 128; d.q_lora_rank = 1536; d.kv_lora_rank = 512; d.qk_nope_head_dim = 128;
    d.qk_rope_head_dim = 64; d.v_head_dim = 128;
    t.push_back({{"deepseek-v3", "deepseek_v3", "deepseek-v3-fp8"}, d});
    d = {};
    d.arch = "mixtral"; d.hidden = 4096; d.intermediate = 14336; d.experts = 8; d.top_k = 2; d.layers = 32;
    d.vocab = 32000; d.attention = true; d.heads = 32; d.kv_heads = 8; d.head_dim = 128;
    t.push_back({{"mixtral-8x7b", "mixtral", "mixtral-bf16"}, d});
    return t;
  }();
  return table;
}

const Preset& find_preset(const std::string& name) {
  for (const auto& p : presets())
    if (p.info.name == name) return p;
  std::string known;
  for (const auto& p : presets()) known += (known.empty() ? "" : ", ") + p.info.name;
  throw Error(ErrorKind::usage, "unknown real-shape model `" + name + "` (known: " + known + ")");
}

// Small-sample defaults: kernel-plausible but tiny. gpt-oss uses 192 (6 MXFP4 groups, a multiple
// of 32 but not of 128) so the backends' padding rules get exercised.
SampleDims small_defaults(const FamilyDef& f) {
  SampleDims d;
  d.arch = f.info.arch;
  d.hidden = d.arch == "gpt_oss" ? 192 : 128;
  // vLLM's CUTLASS W4A8 method (the FP8-activation path on SM90) asserts hidden and intermediate
  // sizes divisible by 256 in create_weights.
  if (f.scheme == Scheme::ct_w4a8_fp8) d.hidden = 256;
  d.intermediate = d.hidden;
  d.dense_intermediate = 128;
  d.experts = 4;
  d.top_k = 2;
  d.vocab = 16;
  d.heads = 4;
  d.kv_heads = 2;
  d.head_dim = 32;
  if (d.arch == "deepseek_v3" || d.arch == "deepseek_v4" || d.arch == "nemotron_h" || d.arch == "llama4") d.shared_experts = 1;
  if (d.arch == "deepseek_v3") {
    d.first_dense = 1;
    d.q_lora_rank = 96;
    d.kv_lora_rank = 64;
    d.qk_nope_head_dim = 32;
    d.qk_rope_head_dim = 16;
    d.v_head_dim = 32;
  }
  return d;
}

// ---- tensor helpers ----------------------------------------------------------------------

struct Ctx {
  const FamilyDef& family;
  const SampleDims& d;
  uint64_t seed;
  Sink& sink;
};

std::vector<float> random_values(uint64_t seed, const std::string& key, uint64_t n, float mean, float stddev) {
  Rng rng(derive_seed(seed, key));
  std::vector<float> v(n);
  for (auto& x : v) x = mean + stddev * rng.normal();
  return v;
}

uint64_t count(const std::vector<uint64_t>& shape) {
  uint64_t n = 1;
  for (uint64_t s : shape) n *= s;
  return n;
}

void add_bf16(Ctx& c, const std::string& name, std::vector<uint64_t> shape, float mean, float stddev) {
  std::vector<uint8_t> bytes;
  if (c.sink.with_data()) bytes = bytes_as(random_values(c.seed, name, count(shape), mean, stddev), ScaleStorage::bf16);
  c.sink.add(name, DType::BF16, std::move(shape), std::move(bytes));
}

void add_f32(Ctx& c, const std::string& name, std::vector<uint64_t> shape, float mean, float stddev) {
  std::vector<uint8_t> bytes;
  if (c.sink.with_data()) bytes = bytes_of_f32(random_values(c.seed, name, count(shape), mean, stddev));
  c.sink.add(name, DType::F32, std::move(shape), std::move(bytes));
}

void add_norm(Ctx& c, const std::string& name, uint64_t n) { add_bf16(c, name, {n}, 1.0f, 0.05f); }

// DeepSeek-V4's hash-layer table: for every token id, top_k distinct expert ids (I32, seeded).
void add_tid2eid(Ctx& c, const std::string& name) {
  const uint64_t vocab = c.d.vocab, k = c.d.top_k;
  std::vector<uint8_t> bytes;
  if (c.sink.with_data()) {
    Rng rng(derive_seed(c.seed, name));
    bytes.resize(static_cast<size_t>(vocab * k * 4));
    for (uint64_t t = 0; t < vocab; ++t) {
      std::vector<int32_t> row;
      while (row.size() < k) {
        const auto e = static_cast<int32_t>(static_cast<uint64_t>(rng.uniform() * static_cast<double>(c.d.experts)) % c.d.experts);
        if (std::find(row.begin(), row.end(), e) == row.end()) row.push_back(e);
      }
      std::memcpy(bytes.data() + t * k * 4, row.data(), static_cast<size_t>(k * 4));
    }
  }
  c.sink.add(name, DType::I32, {vocab, k}, std::move(bytes));
}

std::string layer_prefix(uint64_t layer) { return "model.layers." + std::to_string(layer) + "."; }

// One MLP (expert, shared expert or dense) as three linears.
void emit_mlp_named(Ctx& c, const std::string& gate, const std::string& up, const std::string& down, const std::string& key,
                    uint64_t width, LinearRole role) {
  const uint64_t h = c.d.hidden;
  emit_mlp(c.sink, c.family.scheme, {gate, key + ".gate", width, h, role}, {up, key + ".up", width, h, role},
           {down, key + ".down", h, width, role}, c.seed);
}

void emit_attention_linear(Ctx& c, const std::string& module, uint64_t out, uint64_t in, bool bias) {
  LinearJob j{module, module, out, in, LinearRole::attention};
  std::unique_ptr<Matrix> w;
  if (c.sink.with_data()) w = std::make_unique<Matrix>(linear_source(c.seed, module, out, in));
  // gpt-oss exports quantize the experts only ("MoE-Quant"): attention stays BF16.
  emit_linear(c.sink, c.d.arch == "gpt_oss" ? Scheme::bf16 : c.family.scheme, j, w.get(), 0.0f, c.seed);
  if (bias) add_bf16(c, module + ".bias", {out}, 0.0f, 0.01f);
}

void emit_gqa_attention(Ctx& c, const std::string& p, bool bias, bool qk_norm) {
  const SampleDims& d = c.d;
  emit_attention_linear(c, p + "self_attn.q_proj", d.heads * d.head_dim, d.hidden, bias);
  emit_attention_linear(c, p + "self_attn.k_proj", d.kv_heads * d.head_dim, d.hidden, bias);
  emit_attention_linear(c, p + "self_attn.v_proj", d.kv_heads * d.head_dim, d.hidden, bias);
  emit_attention_linear(c, p + "self_attn.o_proj", d.hidden, d.heads * d.head_dim, bias);
  if (qk_norm) {
    add_norm(c, p + "self_attn.q_norm.weight", d.head_dim);
    add_norm(c, p + "self_attn.k_norm.weight", d.head_dim);
  }
}

void emit_mla_attention(Ctx& c, const std::string& p) {
  const SampleDims& d = c.d;
  emit_attention_linear(c, p + "self_attn.q_a_proj", d.q_lora_rank, d.hidden, false);
  add_norm(c, p + "self_attn.q_a_layernorm.weight", d.q_lora_rank);
  emit_attention_linear(c, p + "self_attn.q_b_proj", d.heads * (d.qk_nope_head_dim + d.qk_rope_head_dim), d.q_lora_rank, false);
  emit_attention_linear(c, p + "self_attn.kv_a_proj_with_mqa", d.kv_lora_rank + d.qk_rope_head_dim, d.hidden, false);
  add_norm(c, p + "self_attn.kv_a_layernorm.weight", d.kv_lora_rank);
  emit_attention_linear(c, p + "self_attn.kv_b_proj", d.heads * (d.qk_nope_head_dim + d.v_head_dim), d.kv_lora_rank, false);
  emit_attention_linear(c, p + "self_attn.o_proj", d.hidden, d.heads * d.v_head_dim, false);
}

// ---- architectures -----------------------------------------------------------------------

// Qwen3-MoE, Mixtral and DeepSeek-V3 share the HF per-expert layout; they differ in module names.
void emit_hf_per_expert(Ctx& c) {
  const SampleDims& d = c.d;
  const bool mixtral = d.arch == "mixtral", deepseek = d.arch == "deepseek_v3";
  add_bf16(c, "model.embed_tokens.weight", {d.vocab, d.hidden}, 0.0f, 0.02f);
  for (uint64_t l = 0; l < d.layers; ++l) {
    const std::string p = layer_prefix(l);
    const std::string ls = "layers." + std::to_string(l);
    add_norm(c, p + "input_layernorm.weight", d.hidden);
    if (d.attention) {
      if (deepseek) emit_mla_attention(c, p);
      else emit_gqa_attention(c, p, false, !mixtral);
    }
    add_norm(c, p + "post_attention_layernorm.weight", d.hidden);
    if (l < d.first_dense) {
      emit_mlp_named(c, p + "mlp.gate_proj", p + "mlp.up_proj", p + "mlp.down_proj", ls + ".dense", d.dense_intermediate,
                     LinearRole::dense_mlp);
      continue;
    }
    const std::string moe = p + (mixtral ? "block_sparse_moe." : "mlp.");
    add_bf16(c, moe + "gate.weight", {d.experts, d.hidden}, 0.0f, 0.02f);
    if (deepseek) add_f32(c, moe + "gate.e_score_correction_bias", {d.experts}, 0.0f, 0.01f);
    for (uint64_t e = 0; e < d.experts; ++e) {
      const std::string x = moe + "experts." + std::to_string(e) + ".";
      if (mixtral) emit_mlp_named(c, x + "w1", x + "w3", x + "w2", ls + ".experts." + std::to_string(e), d.intermediate, LinearRole::routed_expert);
      else emit_mlp_named(c, x + "gate_proj", x + "up_proj", x + "down_proj", ls + ".experts." + std::to_string(e), d.intermediate, LinearRole::routed_expert);
    }
    if (d.shared_experts) {
      const std::string s = moe + "shared_experts.";
      emit_mlp_named(c, s + "gate_proj", s + "up_proj", s + "down_proj", ls + ".shared", d.intermediate * d.shared_experts,
                     LinearRole::shared_expert);
    }
  }
  add_norm(c, "model.norm.weight", d.hidden);
  add_bf16(c, "lm_head.weight", {d.vocab, d.hidden}, 0.0f, 0.02f);
}

// DeepSeek-V4's own names: no `model.` prefix, ffn.experts.E.w1/w2/w3 with .weight and .scale.
void emit_deepseek_v4(Ctx& c) {
  const SampleDims& d = c.d;
  add_bf16(c, "embed.weight", {d.vocab, d.hidden}, 0.0f, 0.02f);
  for (uint64_t l = 0; l < d.layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    add_norm(c, p + "attn_norm.weight", d.hidden);
    add_norm(c, p + "ffn_norm.weight", d.hidden);
    add_bf16(c, p + "ffn.gate.weight", {d.experts, d.hidden}, 0.0f, 0.02f);
    if (l < d.hash_layers) add_tid2eid(c, p + "ffn.gate.tid2eid");  // hash layers: no correction bias
    else add_f32(c, p + "ffn.gate.bias", {d.experts}, 0.0f, 0.01f);
    for (uint64_t e = 0; e < d.experts; ++e) {
      const std::string x = p + "ffn.experts." + std::to_string(e) + ".";
      emit_mlp_named(c, x + "w1", x + "w3", x + "w2", "layers." + std::to_string(l) + ".experts." + std::to_string(e),
                     d.intermediate, LinearRole::routed_expert);
    }
    const std::string s = p + "ffn.shared_experts.";
    emit_mlp_named(c, s + "w1", s + "w3", s + "w2", "layers." + std::to_string(l) + ".shared", d.intermediate * d.shared_experts,
                   LinearRole::shared_expert);
  }
  add_norm(c, "norm.weight", d.hidden);
  add_bf16(c, "head.weight", {d.vocab, d.hidden}, 0.0f, 0.02f);
}

// Nemotron-H (ERRATA 12) under its own `backbone.` names, one mixer per block. Only MoE blocks
// are written: the Mamba-2, attention and dense MLP blocks a released model interleaves with
// them (hybrid_override_pattern "M", "*", "-") hold nothing a MoE converter reads. The experts
// are not gated: up_proj and down_proj only (relu2 without a multiply), so the source keys are
// "up" and "down" of each expert, as in the gated families. The router scores with a sigmoid
// and a correction bias; the shared expert is left in BF16.
void emit_nemotron_h(Ctx& c) {
  const SampleDims& d = c.d;
  const uint64_t H = d.hidden, I = d.intermediate;
  add_bf16(c, "backbone.embeddings.weight", {d.vocab, H}, 0.0f, 0.02f);
  for (uint64_t l = 0; l < d.layers; ++l) {
    const std::string p = "backbone.layers." + std::to_string(l) + ".";
    add_norm(c, p + "norm.weight", H);
    const std::string m = p + "mixer.";
    add_bf16(c, m + "gate.weight", {d.experts, H}, 0.0f, 0.02f);
    add_f32(c, m + "gate.e_score_correction_bias", {d.experts}, 0.0f, 0.01f);
    auto emit_up_down = [&](const std::string& x, const std::string& key, uint64_t width, Scheme scheme, LinearRole role) {
      for (auto [proj, out, in] : {std::tuple{"up", width, H}, std::tuple{"down", H, width}}) {
        LinearJob j{x + proj + "_proj", key + "." + proj, out, in, role};
        std::unique_ptr<Matrix> w;
        if (c.sink.with_data()) w = std::make_unique<Matrix>(linear_source(c.seed, j.key, out, in));
        // No gate to share a global scale with: each NVFP4 linear is calibrated on its own.
        emit_linear(c.sink, scheme, j, w.get(), 0.0f, c.seed);
      }
    };
    for (uint64_t e = 0; e < d.experts; ++e)
      emit_up_down(m + "experts." + std::to_string(e) + ".", "layers." + std::to_string(l) + ".experts." + std::to_string(e), I,
                   c.family.scheme, LinearRole::routed_expert);
    emit_up_down(m + "shared_experts.", "layers." + std::to_string(l) + ".shared", I * d.shared_experts, Scheme::bf16,
                 LinearRole::shared_expert);
  }
  add_norm(c, "backbone.norm_f.weight", H);
  add_bf16(c, "lm_head.weight", {d.vocab, H}, 0.0f, 0.02f);
}

// Llama-4 ModelOpt FP8 (ERRATA 16): every expert of a layer in two input-major tensors,
// gate_up_proj [E, H, 2I] (columns gate then up by halves) and down_proj [E, I, H]. ModelOpt
// calibrates the fused tensor as one, so a single F32 weight scale (amax over all experts / 448)
// and a single static input scale cover every expert.
void emit_llama4_experts(Ctx& c, uint64_t layer, const std::string& p) {
  const SampleDims& d = c.d;
  const uint64_t E = d.experts, H = d.hidden, I = d.intermediate;
  std::vector<uint8_t> gate_up, down, gate_up_scale, down_scale, gate_up_input, down_input;
  if (c.sink.with_data()) {
    // All experts stacked as nn.Linear rows ([E·2I, H] and [E·H, I]), quantized with one scale.
    Matrix all_gate_up{E * 2 * I, H, {}}, all_down{E * H, I, {}};
    for (uint64_t e = 0; e < E; ++e) {
      for (const char* proj : {"gate", "up"}) {
        Matrix w = linear_source(c.seed, expert_key(layer, e, proj), I, H);
        all_gate_up.values.insert(all_gate_up.values.end(), w.values.begin(), w.values.end());
      }
      Matrix w = linear_source(c.seed, expert_key(layer, e, "down"), H, I);
      all_down.values.insert(all_down.values.end(), w.values.begin(), w.values.end());
    }
    Fp8Quantized qgu = quantize_fp8(all_gate_up, all_gate_up.rows, H, ScaleStorage::f32, false);
    Fp8Quantized qdn = quantize_fp8(all_down, all_down.rows, I, ScaleStorage::f32, false);
    // Each expert's [out, in] block is stored transposed, [in, out].
    for (uint64_t e = 0; e < E; ++e) {
      std::vector<uint8_t> gu(qgu.codes.begin() + static_cast<std::ptrdiff_t>(e * 2 * I * H),
                              qgu.codes.begin() + static_cast<std::ptrdiff_t>((e + 1) * 2 * I * H));
      std::vector<uint8_t> dn(qdn.codes.begin() + static_cast<std::ptrdiff_t>(e * H * I),
                              qdn.codes.begin() + static_cast<std::ptrdiff_t>((e + 1) * H * I));
      std::vector<uint8_t> gu_t = transpose(gu, 2 * I, H), dn_t = transpose(dn, H, I);
      gate_up.insert(gate_up.end(), gu_t.begin(), gu_t.end());
      down.insert(down.end(), dn_t.begin(), dn_t.end());
    }
    gate_up_scale = bytes_of_f32(qgu.scales);
    down_scale = bytes_of_f32(qdn.scales);
    gate_up_input = bytes_of_f32({activation_amax(c.seed, "layers." + std::to_string(layer) + ".experts.gate_up") / 448.0f});
    down_input = bytes_of_f32({activation_amax(c.seed, "layers." + std::to_string(layer) + ".experts.down") / 448.0f});
  }
  c.sink.add(p + "gate_up_proj", DType::F8_E4M3, {E, H, 2 * I}, std::move(gate_up));
  c.sink.add(p + "down_proj", DType::F8_E4M3, {E, I, H}, std::move(down));
  c.sink.add(p + "gate_up_proj_weight_scale", DType::F32, {}, std::move(gate_up_scale));
  c.sink.add(p + "down_proj_weight_scale", DType::F32, {}, std::move(down_scale));
  c.sink.add(p + "gate_up_proj_input_scale", DType::F32, {}, std::move(gate_up_input));
  c.sink.add(p + "down_proj_input_scale", DType::F32, {}, std::move(down_input));
}

// Llama-4's text model under the multimodal wrapper's `language_model.` names. Every layer is a
// MoE layer (interleave_moe_layer_step 1, as Scout), routed top-1 with a shared expert. The
// vision tower and projector of a released checkpoint are left out.
void emit_llama4(Ctx& c) {
  const SampleDims& d = c.d;
  add_bf16(c, "language_model.model.embed_tokens.weight", {d.vocab, d.hidden}, 0.0f, 0.02f);
  for (uint64_t l = 0; l < d.layers; ++l) {
    const std::string p = "language_model.model.layers." + std::to_string(l) + ".";
    add_norm(c, p + "input_layernorm.weight", d.hidden);
    add_norm(c, p + "post_attention_layernorm.weight", d.hidden);
    const std::string f = p + "feed_forward.";
    add_bf16(c, f + "router.weight", {d.experts, d.hidden}, 0.0f, 0.02f);
    emit_llama4_experts(c, l, f + "experts.");
    const std::string s = f + "shared_expert.";
    emit_mlp_named(c, s + "gate_proj", s + "up_proj", s + "down_proj", "layers." + std::to_string(l) + ".shared",
                   d.intermediate * d.shared_experts, LinearRole::shared_expert);
  }
  add_norm(c, "language_model.model.norm.weight", d.hidden);
  add_bf16(c, "language_model.lm_head.weight", {d.vocab, d.hidden}, 0.0f, 0.02f);
}

// gpt-oss' gate_up rows interleaved (row 2i = gate_i, 2i+1 = up_i), biases in the same order.
struct GateUp {
  Matrix weights;
  std::vector<float> bias;
};
GateUp interleaved_gate_up(const Ctx& c, uint64_t layer, uint64_t e) {
  const uint64_t H = c.d.hidden, I = c.d.intermediate;
  Matrix gate = linear_source(c.seed, expert_key(layer, e, "gate"), I, H);
  Matrix up = linear_source(c.seed, expert_key(layer, e, "up"), I, H);
  std::vector<float> gb = bias_source(c.seed, expert_key(layer, e, "gate"), I);
  std::vector<float> ub = bias_source(c.seed, expert_key(layer, e, "up"), I);
  GateUp out{Matrix{2 * I, H, std::vector<float>(2 * I * H)}, {}};
  for (uint64_t i = 0; i < I; ++i) {
    std::copy_n(&gate.values[i * H], H, &out.weights.values[(2 * i) * H]);
    std::copy_n(&up.values[i * H], H, &out.weights.values[(2 * i + 1) * H]);
    out.bias.push_back(gb[i]);
    out.bias.push_back(ub[i]);
  }
  return out;
}

// amd-quark gpt-oss exports (ERRATA 11): one module per expert, gate_up_proj kept fused and
// interleaved as gpt-oss has it, each with its own bias and static input scale.
void emit_gpt_oss_per_expert(Ctx& c, uint64_t layer) {
  const SampleDims& d = c.d;
  const uint64_t H = d.hidden, I = d.intermediate;
  const std::string p = layer_prefix(layer) + "mlp.experts.";
  for (uint64_t e = 0; e < d.experts; ++e) {
    const std::string x = p + std::to_string(e) + ".";
    std::unique_ptr<GateUp> gu;
    std::unique_ptr<Matrix> down;
    if (c.sink.with_data()) {
      gu = std::make_unique<GateUp>(interleaved_gate_up(c, layer, e));
      down = std::make_unique<Matrix>(linear_source(c.seed, expert_key(layer, e, "down"), H, I));
    }
    emit_linear(c.sink, c.family.scheme, {x + "gate_up_proj", expert_key(layer, e, "gate_up"), 2 * I, H, LinearRole::routed_expert}, gu ? &gu->weights : nullptr, 0.0f, c.seed);
    c.sink.add(x + "gate_up_proj.bias", DType::BF16, {2 * I}, gu ? bytes_as(gu->bias, ScaleStorage::bf16) : std::vector<uint8_t>{});
    emit_linear(c.sink, c.family.scheme, {x + "down_proj", expert_key(layer, e, "down"), H, I, LinearRole::routed_expert}, down.get(), 0.0f, c.seed);
    c.sink.add(x + "down_proj.bias", DType::BF16, {H}, c.sink.with_data() ? bytes_as(bias_source(c.seed, expert_key(layer, e, "down"), H), ScaleStorage::bf16) : std::vector<uint8_t>{});
  }
}

// llm-compressor's gpt-oss (ERRATA 15): the experts linearized into one nn.Linear per expert and
// projection before quantization, gate and up separate (not interleaved), each with its BF16
// bias. The weights and biases are the same sources as the fused gpt-oss families'.
void emit_gpt_oss_linearized(Ctx& c, uint64_t layer) {
  const SampleDims& d = c.d;
  const uint64_t H = d.hidden, I = d.intermediate;
  const std::string p = layer_prefix(layer) + "mlp.experts.";
  for (uint64_t e = 0; e < d.experts; ++e) {
    for (auto [proj, out, in] : {std::tuple{"gate", I, H}, std::tuple{"up", I, H}, std::tuple{"down", H, I}}) {
      const std::string module = p + std::to_string(e) + "." + proj + "_proj";
      LinearJob j{module, expert_key(layer, e, proj), out, in, LinearRole::routed_expert};
      std::unique_ptr<Matrix> w;
      if (c.sink.with_data()) w = std::make_unique<Matrix>(linear_source(c.seed, j.key, out, in));
      emit_linear(c.sink, c.family.scheme, j, w.get(), 0.0f, c.seed);
      c.sink.add(module + ".bias", DType::BF16, {out}, c.sink.with_data() ? bytes_as(bias_source(c.seed, j.key, out), ScaleStorage::bf16) : std::vector<uint8_t>{});
    }
  }
}

// gpt-oss in BF16 (the unquantized layout transformers saves): the fused experts input-major,
// gate_up_proj [E, H, 2I] with gate/up interleaved along the columns (column 2i = gate_i,
// 2i+1 = up_i) and down_proj [E, I, H], biases [E, 2I] (same order) and [E, H].
void emit_gpt_oss_bf16_experts(Ctx& c, uint64_t layer) {
  const SampleDims& d = c.d;
  const uint64_t E = d.experts, H = d.hidden, I = d.intermediate;
  const std::string p = layer_prefix(layer) + "mlp.experts.";
  std::vector<uint8_t> gate_up, gate_up_bias, down, down_bias;
  if (c.sink.with_data()) {
    std::vector<float> gu_w, gu_b, dn_w, dn_b;
    for (uint64_t e = 0; e < E; ++e) {
      GateUp gu = interleaved_gate_up(c, layer, e);  // rows 2i, 2i+1 = gate_i, up_i; transposed, columns
      std::vector<float> gu_t = transpose(gu.weights.values, 2 * I, H);
      std::vector<float> dn_t = transpose(linear_source(c.seed, expert_key(layer, e, "down"), H, I).values, H, I);
      std::vector<float> db = bias_source(c.seed, expert_key(layer, e, "down"), H);
      gu_w.insert(gu_w.end(), gu_t.begin(), gu_t.end());
      gu_b.insert(gu_b.end(), gu.bias.begin(), gu.bias.end());
      dn_w.insert(dn_w.end(), dn_t.begin(), dn_t.end());
      dn_b.insert(dn_b.end(), db.begin(), db.end());
    }
    gate_up = bytes_as(gu_w, ScaleStorage::bf16);
    gate_up_bias = bytes_as(gu_b, ScaleStorage::bf16);
    down = bytes_as(dn_w, ScaleStorage::bf16);
    down_bias = bytes_as(dn_b, ScaleStorage::bf16);
  }
  c.sink.add(p + "gate_up_proj", DType::BF16, {E, H, 2 * I}, std::move(gate_up));
  c.sink.add(p + "gate_up_proj_bias", DType::BF16, {E, 2 * I}, std::move(gate_up_bias));
  c.sink.add(p + "down_proj", DType::BF16, {E, I, H}, std::move(down));
  c.sink.add(p + "down_proj_bias", DType::BF16, {E, H}, std::move(down_bias));
}

// gpt-oss: experts fused along a leading E dim, MXFP4 blocks [E, rows, K/32, 16], gate/up rows
// interleaved (row 2i = gate_i, 2i+1 = up_i), BF16 biases in the same order.
void emit_gpt_oss_experts(Ctx& c, uint64_t layer) {
  const SampleDims& d = c.d;
  const uint64_t E = d.experts, H = d.hidden, I = d.intermediate;
  const std::string p = layer_prefix(layer) + "mlp.experts.";
  std::vector<uint8_t> gu_blocks, gu_scales, gu_bias, dn_blocks, dn_scales, dn_bias;
  if (c.sink.with_data()) {
    std::vector<float> gu_bias_f, dn_bias_f;
    for (uint64_t e = 0; e < E; ++e) {
      GateUp gu = interleaved_gate_up(c, layer, e);
      Matrix down = linear_source(c.seed, expert_key(layer, e, "down"), H, I);
      std::vector<float> db = bias_source(c.seed, expert_key(layer, e, "down"), H);
      gu_bias_f.insert(gu_bias_f.end(), gu.bias.begin(), gu.bias.end());
      dn_bias_f.insert(dn_bias_f.end(), db.begin(), db.end());
      MxQuantized qg = quantize_mx(gu.weights, MxElement::e2m1);
      MxQuantized qd = quantize_mx(down, MxElement::e2m1);
      std::vector<uint8_t> pg = pack_nibbles(qg.codes), pd = pack_nibbles(qd.codes);
      gu_blocks.insert(gu_blocks.end(), pg.begin(), pg.end());
      gu_scales.insert(gu_scales.end(), qg.scales.begin(), qg.scales.end());
      dn_blocks.insert(dn_blocks.end(), pd.begin(), pd.end());
      dn_scales.insert(dn_scales.end(), qd.scales.begin(), qd.scales.end());
    }
    gu_bias = bytes_as(gu_bias_f, ScaleStorage::bf16);
    dn_bias = bytes_as(dn_bias_f, ScaleStorage::bf16);
  }
  c.sink.add(p + "gate_up_proj_blocks", DType::U8, {E, 2 * I, H / 32, 16}, std::move(gu_blocks));
  c.sink.add(p + "gate_up_proj_scales", DType::U8, {E, 2 * I, H / 32}, std::move(gu_scales));
  c.sink.add(p + "gate_up_proj_bias", DType::BF16, {E, 2 * I}, std::move(gu_bias));
  c.sink.add(p + "down_proj_blocks", DType::U8, {E, H, I / 32, 16}, std::move(dn_blocks));
  c.sink.add(p + "down_proj_scales", DType::U8, {E, H, I / 32}, std::move(dn_scales));
  c.sink.add(p + "down_proj_bias", DType::BF16, {E, H}, std::move(dn_bias));
}

void emit_gpt_oss(Ctx& c) {
  const SampleDims& d = c.d;
  add_bf16(c, "model.embed_tokens.weight", {d.vocab, d.hidden}, 0.0f, 0.02f);
  for (uint64_t l = 0; l < d.layers; ++l) {
    const std::string p = layer_prefix(l);
    add_norm(c, p + "input_layernorm.weight", d.hidden);
    if (d.attention) {
      emit_gqa_attention(c, p, true, false);
      add_bf16(c, p + "self_attn.sinks", {d.heads}, 0.0f, 1.0f);
    }
    add_norm(c, p + "post_attention_layernorm.weight", d.hidden);
    add_bf16(c, p + "mlp.router.weight", {d.experts, d.hidden}, 0.0f, 0.02f);
    add_bf16(c, p + "mlp.router.bias", {d.experts}, 0.0f, 0.01f);
    switch (c.family.scheme) {
      case Scheme::gpt_oss_mxfp4: emit_gpt_oss_experts(c, l); break;
      case Scheme::bf16: emit_gpt_oss_bf16_experts(c, l); break;
      case Scheme::ct_mxfp4: emit_gpt_oss_linearized(c, l); break;
      default: emit_gpt_oss_per_expert(c, l); break;  // the amd-quark export
    }
  }
  add_norm(c, "model.norm.weight", d.hidden);
  add_bf16(c, "lm_head.weight", {d.vocab, d.hidden}, 0.0f, 0.02f);
}

// ---- config.json -------------------------------------------------------------------------

// Tokens must exist in the vocabulary: small samples use ids 0..2.
int64_t token(const SampleDims& d, int64_t real_id, int64_t small_id) {
  return d.vocab > static_cast<uint64_t>(real_id) ? real_id : small_id;
}

// The config.json of each architecture, sized by `d`.
json qwen3_moe_config(const SampleDims& d) {
  return {{"architectures", {"Qwen3MoeForCausalLM"}}, {"attention_bias", false}, {"attention_dropout", 0.0},
          {"bos_token_id", token(d, 151643, 1)}, {"decoder_sparse_step", 1}, {"eos_token_id", token(d, 151645, 2)},
          {"head_dim", d.head_dim}, {"hidden_act", "silu"}, {"hidden_size", d.hidden}, {"initializer_range", 0.02},
          {"intermediate_size", d.dense_intermediate}, {"max_position_embeddings", 40960}, {"max_window_layers", d.layers},
          {"mlp_only_layers", json::array()}, {"model_type", "qwen3_moe"}, {"moe_intermediate_size", d.intermediate},
          {"norm_topk_prob", true}, {"num_attention_heads", d.heads}, {"num_experts", d.experts},
          {"num_experts_per_tok", d.top_k}, {"num_hidden_layers", d.layers}, {"num_key_value_heads", d.kv_heads},
          {"output_router_logits", false}, {"rms_norm_eps", 1e-06}, {"rope_scaling", nullptr}, {"rope_theta", 1000000.0},
          {"router_aux_loss_coef", 0.001}, {"sliding_window", nullptr}, {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"}, {"transformers_version", "4.56.0"}, {"use_cache", true},
          {"use_sliding_window", false}, {"vocab_size", d.vocab}};
}

json mixtral_config(const SampleDims& d) {
  return {{"architectures", {"MixtralForCausalLM"}}, {"attention_dropout", 0.0}, {"bos_token_id", 1}, {"eos_token_id", 2},
          {"head_dim", d.head_dim}, {"hidden_act", "silu"}, {"hidden_size", d.hidden}, {"initializer_range", 0.02},
          {"intermediate_size", d.intermediate}, {"max_position_embeddings", 32768}, {"model_type", "mixtral"},
          {"num_attention_heads", d.heads}, {"num_experts_per_tok", d.top_k}, {"num_hidden_layers", d.layers},
          {"num_key_value_heads", d.kv_heads}, {"num_local_experts", d.experts}, {"output_router_logits", false},
          {"rms_norm_eps", 1e-05}, {"rope_theta", 1000000.0}, {"router_aux_loss_coef", 0.02}, {"sliding_window", nullptr},
          {"tie_word_embeddings", false}, {"torch_dtype", "bfloat16"}, {"transformers_version", "4.56.0"},
          {"use_cache", true}, {"vocab_size", d.vocab}};
}

json gpt_oss_config(const SampleDims& d, const json& quant) {
  json layer_types = json::array();
  for (uint64_t l = 0; l < d.layers; ++l) layer_types.push_back(l % 2 == 0 ? "sliding_attention" : "full_attention");
  json c = {{"architectures", {"GptOssForCausalLM"}}, {"attention_bias", true}, {"attention_dropout", 0.0},
            {"eos_token_id", token(d, 200002, 2)}, {"experts_per_token", d.top_k}, {"head_dim", d.head_dim},
            {"hidden_act", "silu"}, {"hidden_size", d.hidden}, {"initial_context_length", 4096}, {"initializer_range", 0.02},
            {"intermediate_size", d.intermediate}, {"layer_types", layer_types}, {"max_position_embeddings", 131072},
            {"model_type", "gpt_oss"}, {"num_attention_heads", d.heads}, {"num_experts_per_tok", d.top_k},
            {"num_hidden_layers", d.layers}, {"num_key_value_heads", d.kv_heads}, {"num_local_experts", d.experts},
            {"output_router_logits", false}, {"pad_token_id", token(d, 199999, 0)}, {"rms_norm_eps", 1e-05},
            {"rope_scaling", {{"beta_fast", 32.0}, {"beta_slow", 1.0}, {"factor", 32.0}, {"original_max_position_embeddings", 4096},
                              {"rope_type", "yarn"}, {"truncate", false}}},
            {"rope_theta", 150000}, {"router_aux_loss_coef", 0.9}, {"sliding_window", 128}, {"swiglu_limit", 7.0},
            {"tie_word_embeddings", false}, {"transformers_version", "4.55.0"}, {"use_cache", true}, {"vocab_size", d.vocab}};
  // The MXFP4 releases name no dtype; an unquantized checkpoint says what its weights are.
  if (quant.is_null()) c["torch_dtype"] = "bfloat16";
  return c;
}

json deepseek_v3_config(const SampleDims& d) {
  // Grouped top-k needs experts divisible by n_group and top_k <= experts in topk_group groups.
  uint64_t n_group = d.experts % 8 == 0 && d.experts >= 64 ? 8 : (d.experts % 2 == 0 && d.experts / 2 >= d.top_k ? 2 : 1);
  uint64_t topk_group = n_group == 8 ? 4 : 1;
  return {{"architectures", {"DeepseekV3ForCausalLM"}}, {"attention_bias", false}, {"attention_dropout", 0.0},
          {"bos_token_id", 0}, {"eos_token_id", 1}, {"ep_size", 1}, {"first_k_dense_replace", d.first_dense},
          {"hidden_act", "silu"}, {"hidden_size", d.hidden}, {"initializer_range", 0.02},
          {"intermediate_size", d.dense_intermediate}, {"kv_lora_rank", d.kv_lora_rank}, {"max_position_embeddings", 163840},
          {"model_type", "deepseek_v3"}, {"moe_intermediate_size", d.intermediate}, {"moe_layer_freq", 1},
          {"n_group", n_group}, {"n_routed_experts", d.experts}, {"n_shared_experts", d.shared_experts},
          {"norm_topk_prob", true}, {"num_attention_heads", d.heads}, {"num_experts_per_tok", d.top_k},
          {"num_hidden_layers", d.layers}, {"num_key_value_heads", d.heads}, {"num_nextn_predict_layers", 0},
          {"q_lora_rank", d.q_lora_rank}, {"qk_nope_head_dim", d.qk_nope_head_dim}, {"qk_rope_head_dim", d.qk_rope_head_dim},
          {"rms_norm_eps", 1e-06},
          {"rope_scaling", {{"beta_fast", 32}, {"beta_slow", 1}, {"factor", 40}, {"mscale", 1.0}, {"mscale_all_dim", 1.0},
                            {"original_max_position_embeddings", 4096}, {"type", "yarn"}}},
          {"rope_theta", 10000}, {"routed_scaling_factor", 2.5}, {"scoring_func", "sigmoid"}, {"tie_word_embeddings", false},
          {"topk_group", topk_group}, {"topk_method", "noaux_tc"}, {"torch_dtype", "bfloat16"},
          {"transformers_version", "4.33.1"}, {"use_cache", true}, {"v_head_dim", d.v_head_dim}, {"vocab_size", d.vocab}};
}

json nemotron_h_config(const SampleDims& d) {
  // Only MoE blocks are written (emit_nemotron_h), so the pattern is all "E".
  return {{"architectures", {"NemotronHForCausalLM"}}, {"bos_token_id", 1}, {"eos_token_id", 2}, {"head_dim", d.head_dim},
          {"hidden_size", d.hidden}, {"hybrid_override_pattern", std::string(d.layers, 'E')}, {"initializer_range", 0.02},
          {"layer_norm_epsilon", 1e-05}, {"mamba_hidden_act", "silu"}, {"max_position_embeddings", 262144}, {"mlp_bias", false},
          {"mlp_hidden_act", "relu2"}, {"model_type", "nemotron_h"}, {"moe_intermediate_size", d.intermediate},
          {"moe_shared_expert_intermediate_size", d.intermediate * d.shared_experts}, {"n_group", 1},
          {"n_routed_experts", d.experts}, {"n_shared_experts", d.shared_experts}, {"norm_topk_prob", true},
          {"num_attention_heads", d.heads}, {"num_experts_per_tok", d.top_k}, {"num_hidden_layers", d.layers},
          {"num_key_value_heads", d.kv_heads}, {"pad_token_id", 0}, {"residual_in_fp32", false}, {"routed_scaling_factor", 2.5},
          {"tie_word_embeddings", false}, {"topk_group", 1}, {"torch_dtype", "bfloat16"}, {"transformers_version", "4.56.0"},
          {"use_bias", false}, {"use_cache", true}, {"vocab_size", d.vocab}};
}

json llama4_config(const SampleDims& d) {
  // The numbers live in text_config, as the multimodal release has them. intermediate_size_mlp
  // (the dense layers' width, 2x the experts' as in Scout) is unused: every layer is MoE.
  json text = {{"attention_bias", false}, {"attention_chunk_size", 8192}, {"bos_token_id", token(d, 200000, 1)},
               {"eos_token_id", token(d, 200008, 2)}, {"head_dim", d.head_dim}, {"hidden_act", "silu"},
               {"hidden_size", d.hidden}, {"initializer_range", 0.02}, {"interleave_moe_layer_step", 1},
               {"intermediate_size", d.intermediate}, {"intermediate_size_mlp", 2 * d.intermediate},
               {"max_position_embeddings", 10485760}, {"model_type", "llama4_text"}, {"num_attention_heads", d.heads},
               {"num_experts_per_tok", d.top_k}, {"num_hidden_layers", d.layers}, {"num_key_value_heads", d.kv_heads},
               {"num_local_experts", d.experts}, {"output_router_logits", false}, {"pad_token_id", token(d, 200018, 0)},
               {"rms_norm_eps", 1e-05}, {"rope_theta", 500000.0}, {"router_aux_loss_coef", 0.001}, {"router_jitter_noise", 0.0},
               {"torch_dtype", "bfloat16"}, {"use_qk_norm", true}, {"vocab_size", d.vocab}};
  return {{"architectures", {"Llama4ForConditionalGeneration"}}, {"model_type", "llama4"}, {"text_config", text},
          {"tie_word_embeddings", false}, {"torch_dtype", "bfloat16"}, {"transformers_version", "4.51.0"}};
}

json deepseek_v4_config(const SampleDims& d, const std::string& expert_dtype) {
  return {{"architectures", {"DeepseekV4ForCausalLM"}}, {"bos_token_id", 0}, {"eos_token_id", 1}, {"expert_dtype", expert_dtype},
          {"hidden_size", d.hidden}, {"model_type", "deepseek_v4"}, {"moe_intermediate_size", d.intermediate},
          {"n_routed_experts", d.experts}, {"n_shared_experts", d.shared_experts}, {"norm_topk_prob", true},
          {"num_attention_heads", d.heads}, {"num_experts_per_tok", d.top_k}, {"num_hash_layers", d.hash_layers},
          {"num_hidden_layers", d.layers}, {"num_nextn_predict_layers", 0}, {"rms_norm_eps", 1e-06},
          {"routed_scaling_factor", 1.5}, {"scoring_func", "sqrtsoftplus"}, {"swiglu_limit", 10.0},
          {"tie_word_embeddings", false}, {"topk_method", "noaux_tc"}, {"torch_dtype", "bfloat16"}, {"vocab_size", d.vocab}};
}

json config_for(const SampleDims& d, const json& quant, Scheme scheme) {
  const std::string& a = d.arch;
  json c = a == "qwen3_moe"     ? qwen3_moe_config(d)
           : a == "mixtral"     ? mixtral_config(d)
           : a == "gpt_oss"     ? gpt_oss_config(d, quant)
           : a == "deepseek_v3" ? deepseek_v3_config(d)
           : a == "nemotron_h"  ? nemotron_h_config(d)
           : a == "llama4"      ? llama4_config(d)
                                : deepseek_v4_config(d, scheme == Scheme::deepseek_v4_fp8 ? "fp8" : "fp4");
  if (!quant.is_null()) c["quantization_config"] = quant;
  return c;
}

Unquantized unquantized_modules(const SampleDims& d) {
  Unquantized u;
  std::string layers = "model.layers.";
  u.router_suffix = "mlp.gate";
  if (d.arch == "mixtral") {
    u.router_suffix = "block_sparse_moe.gate";
  } else if (d.arch == "gpt_oss") {
    u.router_suffix = "mlp.router";
  } else if (d.arch == "nemotron_h") {
    u.router_suffix = "mixer.gate";
    layers = "backbone.layers.";
  } else if (d.arch == "llama4") {
    u.router_suffix = "feed_forward.router";
    layers = "language_model.model.layers.";
    u.lm_head = "language_model.lm_head";
  }
  u.layers_glob = layers + "*.";
  for (uint64_t l = d.first_dense; l < d.layers; ++l) u.routers.push_back(layers + std::to_string(l) + "." + u.router_suffix);
  if (d.arch == "gpt_oss") u.patterns.push_back("*self_attn*");  // gpt-oss exports quantize the experts only
  if (d.arch == "nemotron_h") u.patterns.push_back("backbone.layers.*.mixer.shared_experts.*");  // kept in BF16
  return u;
}

}  // namespace

const std::vector<FamilyInfo>& family_table() {
  static const std::vector<FamilyInfo> infos = [] {
    std::vector<FamilyInfo> v;
    for (const auto& f : families()) v.push_back(f.info);
    return v;
  }();
  return infos;
}

std::vector<std::string> synth_families() {
  std::vector<std::string> names;
  for (const auto& f : families()) names.push_back(f.info.name);
  return names;
}

const std::vector<ModelInfo>& real_shape_models() {
  static const std::vector<ModelInfo> infos = [] {
    std::vector<ModelInfo> v;
    for (const auto& p : presets()) v.push_back(p.info);
    return v;
  }();
  return infos;
}

const FamilyDef& find_family(const std::string& name) {
  for (const auto& f : families())
    if (f.info.name == name) return f;
  throw Error(ErrorKind::usage, "unknown family `" + name + "` (moepack sample --list shows them)");
}

SampleDims sample_dims(const std::string& family_name, const SampleOptions& o) {
  const FamilyDef& f = find_family(family_name);
  if (o.experts < 0 || o.layers < 0 || o.hidden < 0 || o.intermediate < 0 || o.shards < 0)
    throw Error(ErrorKind::usage, "sample: sizes must not be negative");
  SampleDims d;
  if (!o.real_shape.empty()) {
    const Preset& p = find_preset(o.real_shape);
    auto fits = [&f](const Preset& preset) {
      return f.info.arch == preset.info.arch || (is_generic_per_expert(f) && preset.info.arch != "gpt_oss");
    };
    if (!fits(p)) {
      // Name the models that would fit, or say that none has this layout (Llama-4, Nemotron-H,
      // DeepSeek-V4 have no real-shape preset), so the refusal is actionable.
      std::string fitting;
      for (const auto& other : presets())
        if (fits(other)) fitting += (fitting.empty() ? "" : ", ") + other.info.name;
      throw Error(ErrorKind::usage, "family `" + family_name + "` (" + f.info.arch + " layout) cannot take the layout of " + p.info.name +
                                        (fitting.empty() ? "; no real-shape model has the " + f.info.arch + " layout" : "; it fits " + fitting));
    }
    if (o.hidden || o.intermediate || o.shards)
      throw Error(ErrorKind::usage, "a real-shape checkpoint keeps the model's sizes and 5 GB shards");
    d = p.dims;
    if (o.experts) {
      d.experts = static_cast<uint64_t>(o.experts);
      d.top_k = std::min(d.top_k, d.experts);
    }
    if (o.layers) {
      if (static_cast<uint64_t>(o.layers) > d.layers)
        throw Error(ErrorKind::usage, p.info.name + " has only " + std::to_string(d.layers) + " layers");
      d.layers = static_cast<uint64_t>(o.layers);
      d.first_dense = std::min(d.first_dense, d.layers);
    }
  } else {
    d = small_defaults(f);
    if (o.experts) d.experts = static_cast<uint64_t>(o.experts);
    if (o.hidden) d.hidden = static_cast<uint64_t>(o.hidden);
    if (o.intermediate) d.intermediate = static_cast<uint64_t>(o.intermediate);
    d.layers = d.first_dense + static_cast<uint64_t>(o.layers ? o.layers : 1);
    // Top-2 needs at least 4 experts for routing to choose; with fewer, top-1.
    d.top_k = d.experts >= 4 ? 2 : 1;
  }
  if (d.arch == "llama4") d.top_k = 1;  // Llama-4 routes every token to one expert (plus the shared one)
  if (o.hash_layers < 0 || (o.hash_layers > 0 && d.arch != "deepseek_v4"))
    throw Error(ErrorKind::usage, "sample: hash-routed layers are DeepSeek-V4's (num_hash_layers)");
  d.hash_layers = std::min<uint64_t>(static_cast<uint64_t>(o.hash_layers), d.layers);
  if (d.experts < 2) throw Error(ErrorKind::usage, "sample: a Mixture-of-Experts layer needs at least 2 experts");
  for (uint64_t v : {d.hidden, d.intermediate})
    if (v == 0 || v % f.k_multiple)
      throw Error(ErrorKind::usage, "family `" + family_name + "` needs hidden and intermediate sizes that are multiples of " +
                                        std::to_string(f.k_multiple) + " (got " + std::to_string(v) + ")");
  return d;
}

Matrix linear_source(uint64_t seed, const std::string& key, uint64_t rows, uint64_t cols) {
  Rng rng(derive_seed(seed, key));
  Matrix m{rows, cols, std::vector<float>(rows * cols)};
  for (uint64_t r = 0; r < rows; ++r) {
    // Rows of trained weights differ in range; spreading them exercises per-row/group scales.
    float row_std = 0.02f * (0.5f + 1.5f * rng.uniform());
    for (uint64_t c = 0; c < cols; ++c) m.values[r * cols + c] = row_std * rng.normal();
  }
  return m;
}

std::string expert_key(uint64_t layer, uint64_t expert, const std::string& proj) {
  return "layers." + std::to_string(layer) + ".experts." + std::to_string(expert) + "." + proj;
}

std::vector<float> bias_source(uint64_t seed, const std::string& key, uint64_t n) {
  return random_values(seed, key + ".bias", n, 0.0f, 0.01f);
}

ModelBuild build_model(const FamilyDef& family, const SampleDims& dims, uint64_t seed, Sink& sink) {
  Ctx c{family, dims, seed, sink};
  if (dims.arch == "gpt_oss") emit_gpt_oss(c);
  else if (dims.arch == "deepseek_v4") emit_deepseek_v4(c);
  else if (dims.arch == "nemotron_h") emit_nemotron_h(c);
  else if (dims.arch == "llama4") emit_llama4(c);
  else emit_hf_per_expert(c);
  Unquantized u = unquantized_modules(dims);
  ModelBuild mb;
  mb.config = config_for(dims, quantization_config(family.scheme, u), family.scheme);
  mb.extra_files = extra_quant_files(family.scheme, u);
  return mb;
}

}  // namespace moepack::synth
