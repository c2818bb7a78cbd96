// DeepSeek-V4 checkpoints (checkpoint-formats.md 3.9, ERRATA 10): `quant_method: fp8` plus a
// top-level `expert_dtype` ("fp4" by default). vLLM remaps the method to "deepseek_v4_fp8".
// Routed experts use the native names `layers.L.ffn.experts.E.{w1,w2,w3}.{weight,scale}`:
//   fp4: weight I8 [N, K/2] (FP4 pairs, low nibble first), scale F8_E8M0 [N, K/32] -> vLLM
//        Mxfp4MoEMethod params w13_weight / w13_weight_scale (bytes unchanged, labelled U8)
//   fp8: weight F8_E4M3 [N, K], scale F32 [ceil(N/128), ceil(K/128)] -> Fp8MoEMethod with
//        block 128x128, params w13_weight / w13_weight_scale_inv
//   fp4 with `quantization_config.moe_quant_algo: NVFP4` (ERRATA 13): ModelOpt NVFP4 tensors
//        weight U8 [N, K/2], weight_scale F8_E4M3 [N, K/16], weight_scale_2 and input_scale
//        F32 scalars -> ModelOptNvFp4FusedMoE (group 16), vLLM `DeepseekV4FP8Config`.
#include "formats/checkpoints/checkpoint.h"
#include "lib/core/error.h"

namespace moepack::ckpt::detail {
namespace {

class DeepseekV4Rules final : public FamilyRules {
 public:
  DeepseekV4Rules(std::string expert_dtype, bool nvfp4) : expert_dtype_(std::move(expert_dtype)), nvfp4_(nvfp4) {}
  Family family() const override { return Family::deepseek_v4; }
  std::string scheme() const override {
    if (expert_dtype_ != "fp4") return "deepseek-v4 (fp8 block experts)";
    return nvfp4_ ? "deepseek-v4 (nvfp4 experts, fp8 linears)" : "deepseek-v4 (mxfp4 experts, fp8 linears)";
  }

  LayerQuant layer_quant(const std::string&) const override {
    LayerQuant q;
    if (expert_dtype_ == "fp4" && nvfp4_) {
      q.scheme = "nvfp4 (W4A4)";
      q.method = {"deepseek_v4_fp8", "ModelOptNvFp4FusedMoE", "nvfp4", "kNvfp4Static", "kNvfp4Dynamic"};
      q.weight_bits = 4;
      q.group_size = 16;
      q.input_scales = "dynamic";
      q.global_scale_convention = "multiplier";
      q.checkpoint_format = "NVFP4";
    } else if (expert_dtype_ == "fp4") {
      q.scheme = "mxfp4";
      // The activation key is the selected backend's default (oracle.md 2.2), so none is fixed here.
      q.method = {"deepseek_v4_fp8", "Mxfp4MoEMethod", "mxfp4", "kMxfp4Static", ""};
      q.weight_bits = 4;
      q.group_size = 32;
    } else {
      q.scheme = "fp8 block 128x128";
      q.method = {"deepseek_v4_fp8", "Fp8MoEMethod", "fp8", "kFp8Static128BlockSym", "kFp8Dynamic128Sym"};
      q.weight_bits = 8;
      q.weight_block_size = {128, 128};
      q.input_scales = "dynamic";
    }
    return q;
  }

  ExpertRecipe recipe(const LayerQuant& q, ExpertNaming) const override {
    ExpertRecipe r;
    if (q.method.oracle_family == "nvfp4") {
      r.tensors = fp4_weight_rules("weight", DType::F8_E4M3, 16);
      // FP4 pairs as ModelOpt stores them (U8), or in DeepSeek's own I8 container.
      r.tensors[0].dtypes = {DType::U8, DType::I8};
      r.tensors[0].canonical_dtype = DType::U8;
      r.tensors.push_back(scalar_rule("weight_scale_2", Assemble::pair));
      r.tensors.push_back(scalar_rule("input_scale", Assemble::pair));
    } else if (q.method.oracle_family == "mxfp4") {
      SourceTensorRule w{"weight", {DType::I8, DType::U8}, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i / 2}; }};
      w.param = "weight";
      w.canonical_dtype = DType::U8;
      SourceTensorRule s{"scale", {DType::F8_E8M0, DType::U8}, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, (i + 31) / 32}; }};
      s.param = "weight_scale";
      s.canonical_dtype = DType::U8;
      r.tensors = {w, s};
    } else {
      r.tensors = {fp8_weight_rule("weight"), block_scale_rule("scale", 128, 128, {DType::F32, DType::F8_E8M0})};
      r.tensors[1].param = "weight_scale_inv";
    }
    return r;
  }

 private:
  std::string expert_dtype_;
  bool nvfp4_ = false;
};

}  // namespace

std::unique_ptr<FamilyRules> make_deepseek_v4_rules(const DetectInput& in) {
  std::string expert_dtype = lower(json_string(in.config, "expert_dtype", in.config_file(), "fp4"));
  if (expert_dtype != "fp4" && expert_dtype != "fp8")
    throw_bad_input(in.config_file(), "", "Unsupported DeepSeek V4 expert_dtype `" + expert_dtype + "` (expected fp4 or fp8)");
  // DeepseekV4FP8Config reads moe_quant_algo upper-cased; only NVFP4 changes the experts' method.
  std::string algo = json_string(in.quant_config, "moe_quant_algo", in.quant_source);
  for (char& c : algo) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return std::make_unique<DeepseekV4Rules>(expert_dtype, expert_dtype == "fp4" && algo == "NVFP4");
}

}  // namespace moepack::ckpt::detail
