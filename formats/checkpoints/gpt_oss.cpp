// openai gpt-oss MXFP4 (checkpoint-formats.md 3.2): the family of gpt-oss' own checkpoints,
// quant_method `mxfp4`; gpt_oss_fused_storage.cpp reads their fused experts.
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

}  // namespace

std::unique_ptr<FamilyRules> make_gpt_oss_rules(const DetectInput& in) {
  nlohmann::json exclude = nullptr;
  if (const auto* m = find_key(in.quant_config, "modules_to_not_convert")) exclude = *m;
  return std::make_unique<GptOssRules>(exclude, in.quant_source);
}

}  // namespace moepack::ckpt::detail
