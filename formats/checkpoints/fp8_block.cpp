// `quant_method: fp8` checkpoints (vLLM Fp8Config / Fp8MoEMethod): DeepSeek-V3 style 128x128
// block scales (`weight_block_size`, `weight_scale_inv` F32 [ceil(N/bn), ceil(K/bn)]), or
// per-tensor scales (`weight_scale` scalar, kept per shard: w13 [2]) with static or dynamic
// activation scales (`activation_scheme`), checkpoint-formats.md 3.8, oracle.md 2.2.
#include "formats/checkpoints/checkpoint.h"
#include "lib/core/error.h"

namespace moepack::ckpt::detail {
namespace {

class Fp8Rules final : public FamilyRules {
 public:
  Fp8Rules(std::vector<int64_t> block, std::string activation_scheme, std::vector<std::string> ignored, std::string model_dtype)
      : block_(std::move(block)), activation_scheme_(std::move(activation_scheme)), ignored_(std::move(ignored)), model_dtype_(std::move(model_dtype)) {}

  Family family() const override { return Family::fp8; }
  std::string scheme() const override {
    if (!block_.empty()) return "fp8 block " + std::to_string(block_[0]) + "x" + std::to_string(block_[1]) + " (" + activation_scheme_ + " activations)";
    return "fp8 per-tensor (" + activation_scheme_ + " activations)";
  }

  LayerQuant layer_quant(const std::string& prefix) const override {
    for (const auto& ig : ignored_)
      if (ig == prefix || prefix.rfind(ig + ".", 0) == 0) return unquantized_layer_quant(model_dtype_);
    LayerQuant q;
    q.weight_bits = 8;
    q.weight_block_size = block_;
    if (!block_.empty()) {
      q.scheme = "fp8 block " + std::to_string(block_[0]) + "x" + std::to_string(block_[1]);
      q.method = {"fp8", "Fp8MoEMethod", "fp8", "kFp8Static128BlockSym", "kFp8Dynamic128Sym"};
      q.input_scales = "dynamic";
    } else {
      bool is_static = activation_scheme_ == "static";
      q.scheme = "fp8 per-tensor";
      q.method = {"fp8", "Fp8MoEMethod", "fp8", "kFp8StaticTensorSym", is_static ? "kFp8StaticTensorSym" : "kFp8DynamicTensorSym"};
      q.input_scales = is_static ? "static" : "dynamic";
    }
    return q;
  }

  ExpertRecipe recipe(const LayerQuant& q, ExpertNaming) const override {
    if (!q.quantized()) return unquantized_recipe();
    ExpertRecipe r;
    r.tensors = {fp8_weight_rule("weight")};
    if (!q.weight_block_size.empty()) {
      r.tensors.push_back(block_scale_rule("weight_scale_inv", static_cast<uint64_t>(q.weight_block_size[0]), static_cast<uint64_t>(q.weight_block_size[1]), {DType::F32, DType::BF16}));
    } else {
      r.tensors.push_back(scalar_rule("weight_scale", Assemble::pair));
      // vLLM keeps one static input scale per expert (both shards write it) and reduces with max.
      if (q.input_scales == "static") r.tensors.push_back(scalar_rule("input_scale", Assemble::last_loaded));
    }
    return r;
  }

 private:
  std::vector<int64_t> block_;
  std::string activation_scheme_;
  std::vector<std::string> ignored_;
  std::string model_dtype_;
};

}  // namespace

std::unique_ptr<FamilyRules> make_fp8_rules(const DetectInput& in) {
  const std::string& file = in.quant_source;
  const auto& qc = in.quant_config;
  std::vector<int64_t> block;
  if (const auto* b = find_key(qc, "weight_block_size")) {
    if (!b->is_array() || b->size() != 2 || !(*b)[0].is_number_integer() || !(*b)[1].is_number_integer() || (*b)[0].get<int64_t>() <= 0 || (*b)[1].get<int64_t>() <= 0)
      throw_bad_input(file, "", "fp8: `weight_block_size` must be [n, k] with positive integers, got " + b->dump());
    block = {(*b)[0].get<int64_t>(), (*b)[1].get<int64_t>()};
  }
  std::string act = lower(json_string(qc, "activation_scheme", file, "dynamic"));
  if (act != "static" && act != "dynamic") throw_bad_input(file, "", "fp8: activation_scheme `" + act + "` is neither static nor dynamic");
  if (!block.empty() && act == "static") throw_bad_input(file, "", "fp8: block-quantized weights need activation_scheme dynamic (vLLM refuses static)");
  std::vector<std::string> ignored;
  for (const char* key : {"ignored_layers", "modules_to_not_convert"})
    if (const auto* ig = find_key(qc, key); ig && ig->is_array())
      for (const auto& x : *ig)
        if (x.is_string()) ignored.push_back(x.get<std::string>());
  std::string dtype = json_string(in.config, "torch_dtype", in.config_file(), json_string(in.config, "dtype", in.config_file(), "bfloat16"));
  return std::make_unique<Fp8Rules>(std::move(block), act, std::move(ignored), dtype);
}

}  // namespace moepack::ckpt::detail
