// openai gpt-oss: the MXFP4 family of its own checkpoints (quant_method `mxfp4`, stored as
// gpt_oss_fused_storage.cpp reads it), and what vLLM's gpt-oss model loads differently from the
// generic FusedMoE loader whatever the family (amd-quark, compressed-tensors and BF16 gpt-oss
// checkpoints too): every such rule of the model lives here, so the reader and the storages ask
// no model_type.
#include "formats/checkpoints/checkpoint.h"
#include "lib/core/error.h"

namespace moepack::ckpt::detail {
namespace {

class GptOssRules final : public FamilyRules {
 public:
  GptOssRules(nlohmann::json exclude, std::string source) : exclude_(std::move(exclude)), source_(std::move(source)) {}
  Family family() const override { return Family::gpt_oss; }
  std::string scheme() const override { return "mxfp4 (gpt-oss)"; }
  LayerQuant layer_quant(const std::string& prefix) const override {
    // modules_to_not_convert is a list of fnmatch patterns; excluded experts are plain BF16,
    // which the fused layout cannot hold: refuse rather than guess.
    if (exclude_.is_array())
      for (const auto& p : exclude_)
        if (p.is_string() && (fnmatch_glob(p.get<std::string>(), prefix) || fnmatch_glob(p.get<std::string>() + "*", prefix)))
          throw_bad_input(source_, "", "modules_to_not_convert excludes the MoE layer `" + prefix + "`; unquantized fused gpt-oss experts are not supported");
    LayerQuant q;
    q.scheme = "mxfp4";
    q.method = {"gpt_oss_mxfp4", "GptOssMxfp4MoEMethod", "mxfp4", "kMxfp4Static", ""};
    q.weight_bits = 4;
    q.group_size = 32;
    q.may_have_bias = true;
    return q;
  }
  ExpertRecipe recipe(const LayerQuant&, ExpertNaming) const override {
    ExpertRecipe r;
    r.w13_order = W13Order::interleaved;
    return r;
  }

 private:
  nlohmann::json exclude_;
  std::string source_;
};

// The family's rules, with the recipe as gpt-oss' own loaders (gpt_oss.py _load_weights_mxfp4 /
// _quark / _other @ e9d1398d9) leave it. GptOssModel.load_weights picks the loader by the
// config's quant_method: "mxfp4" (openai's own), "quark" (amd-quark, whose loader also reads
// per-expert tensors), anything else _load_weights_other.
class GptOssLoaderRules final : public FamilyRules {
 public:
  GptOssLoaderRules(std::unique_ptr<FamilyRules> family, std::string quant_method) : family_(std::move(family)), quant_method_(std::move(quant_method)) {}
  Family family() const override { return family_->family(); }
  std::string scheme() const override { return family_->scheme(); }
  LayerQuant layer_quant(const std::string& prefix) const override { return family_->layer_quant(prefix); }
  ExpertRecipe recipe(const LayerQuant& q, ExpertNaming naming) const override {
    ExpertRecipe r = family_->recipe(q, naming);
    r.w2_bias_first_rank_only = true;
    // gpt-oss' activation reads gate/up as interleaved pairs, and its fused 3-D (BF16) tensors
    // keep them so; Llama-4's fused 3-D tensors split the columns in halves.
    if (naming == ExpertNaming::fused_3d) r.w13_order = W13Order::interleaved;
    // _load_weights_other reads the fused tensors only (w13/w2 weights narrowed as 3-D [E, ., .],
    // biases as [E, .]), after GptOssForCausalLM's name mapper, which maps only fused names and
    // quark's per-expert gate_up_proj/down_proj. Per-expert tensors (llm-compressor's gpt-oss,
    // ERRATA 15) never reach a parameter: gate_proj/up_proj and down_proj weights are dropped
    // unread, down_proj.weight_scale becomes `experts.E.w2_weight_scale` and is narrowed with
    // three indices (IndexError), down_proj.bias becomes `experts.E.w2_bias`, which no parameter
    // has (KeyError). Which comes first follows the checkpoint's tensor order; the bias sorts
    // before the scale.
    const bool other_loader = quant_method_ != "mxfp4" && quant_method_ != "gpt_oss_mxfp4" && quant_method_ != "quark";
    if (other_loader && naming != ExpertNaming::gpt_oss_fused && naming != ExpertNaming::fused_3d) {
      r.loader_error = "KeyError";  // gpt-oss experts have biases by architecture, and llm-compressor keeps them
      r.loader_failure = "vLLM's gpt-oss model loads a `" + (quant_method_.empty() ? std::string("unquantized") : quant_method_) +
                         "` checkpoint with GptOssModel._load_weights_other, which reads fused expert tensors only; these experts are stored " +
                         std::string(naming_name(naming)) +
                         ": their gate_proj/up_proj weights are dropped unread, `experts.E.down_proj.weight_scale` is narrowed as a 3-D tensor "
                         "(IndexError) and `experts.E.down_proj.bias` maps to `experts.E.w2_bias`, which is no parameter (KeyError)";
    }
    return r;
  }

 private:
  std::unique_ptr<FamilyRules> family_;
  std::string quant_method_;
};

}  // namespace

std::unique_ptr<FamilyRules> make_gpt_oss_rules(const DetectInput& in) {
  nlohmann::json exclude = nullptr;
  if (const auto* m = find_key(in.quant_config, "modules_to_not_convert")) exclude = *m;
  return std::make_unique<GptOssRules>(exclude, in.quant_source);
}

std::unique_ptr<FamilyRules> with_gpt_oss_loaders(std::unique_ptr<FamilyRules> family, std::string quant_method) {
  return std::make_unique<GptOssLoaderRules>(std::move(family), std::move(quant_method));
}

}  // namespace moepack::ckpt::detail
