// Unquantized (BF16/FP16/FP32) MoE checkpoints: no quantization config at all. Experts are
// per-expert `weight` tensors [out, in] plus optional biases; vLLM uses
// UnquantizedFusedMoEMethod and `select_unquantized_moe_backend` (oracle.md 3.9).
#include "formats/checkpoints/checkpoint.h"

namespace moepack::ckpt::detail {
namespace {

class UnquantizedRules final : public FamilyRules {
 public:
  explicit UnquantizedRules(std::string dtype) : dtype_(std::move(dtype)) {}
  Family family() const override { return Family::unquantized; }
  std::string scheme() const override { return "unquantized (" + unquantized_layer_quant(dtype_).scheme + ")"; }
  LayerQuant layer_quant(const std::string&) const override { return unquantized_layer_quant(dtype_); }
  ExpertRecipe recipe(const LayerQuant&, ExpertNaming) const override { return unquantized_recipe(); }

 private:
  std::string dtype_;
};

}  // namespace

std::unique_ptr<FamilyRules> make_unquantized_rules(const DetectInput& in) {
  std::string dtype = json_string(in.config, "torch_dtype", in.config_file(), json_string(in.config, "dtype", in.config_file(), "bfloat16"));
  return std::make_unique<UnquantizedRules>(dtype);
}

}  // namespace moepack::ckpt::detail
