#include "lib/oracle/moe_types.h"

#include <algorithm>
#include <cctype>

namespace moepack::oracle {

namespace {
struct ActivationRow {
  MoEActivation act;
  const char* value;
  const char* member;
};
const ActivationRow kActivationRows[] = {
    {MoEActivation::SILU, "silu", "SILU"},
    {MoEActivation::GELU, "gelu", "GELU"},
    {MoEActivation::GELU_TANH, "gelu_tanh", "GELU_TANH"},
    {MoEActivation::RELU2, "relu2", "RELU2"},
    {MoEActivation::SWIGLUOAI, "swigluoai", "SWIGLUOAI"},
    {MoEActivation::SITU, "situ", "SITU"},
    {MoEActivation::SWIGLUOAI_UNINTERLEAVE, "swigluoai_uninterleave", "SWIGLUOAI_UNINTERLEAVE"},
    {MoEActivation::SWIGLUSTEP, "swiglustep", "SWIGLUSTEP"},
    {MoEActivation::SILU_NO_MUL, "silu_no_mul", "SILU_NO_MUL"},
    {MoEActivation::GELU_NO_MUL, "gelu_no_mul", "GELU_NO_MUL"},
    {MoEActivation::GELU_TANH_NO_MUL, "gelu_tanh_no_mul", "GELU_TANH_NO_MUL"},
    {MoEActivation::RELU2_NO_MUL, "relu2_no_mul", "RELU2_NO_MUL"},
};
const ActivationRow& row_of(MoEActivation a) {
  for (const auto& r : kActivationRows)
    if (r.act == a) return r;
  return kActivationRows[0];
}

struct RoutingRow {
  RoutingMethodType type;
  const char* name;
};
const RoutingRow kRoutingRows[] = {
    {RoutingMethodType::Default, "Default"},
    {RoutingMethodType::Renormalize, "Renormalize"},
    {RoutingMethodType::DeepSeekV3, "DeepSeekV3"},
    {RoutingMethodType::Llama4, "Llama4"},
    {RoutingMethodType::RenormalizeNaive, "RenormalizeNaive"},
    {RoutingMethodType::TopK, "TopK"},
    {RoutingMethodType::SigmoidRenorm, "SigmoidRenorm"},
    {RoutingMethodType::MiniMax2, "MiniMax2"},
    {RoutingMethodType::Sigmoid, "Sigmoid"},
    {RoutingMethodType::Unspecified, "Unspecified"},
    {RoutingMethodType::DeepseekV4, "DeepseekV4"},
    {RoutingMethodType::Custom, "Custom"},
    {RoutingMethodType::Simulated, "Simulated"},
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}
}  // namespace


std::string activation_value(MoEActivation a) { return row_of(a).value; }
std::string activation_repr(MoEActivation a) { return std::string("MoEActivation.") + row_of(a).member; }

std::optional<MoEActivation> parse_activation(const std::string& s) {
  const std::string v = s == "gelu_pytorch_tanh" ? "gelu_tanh" : s;
  for (const auto& r : kActivationRows)
    if (v == r.value) return r.act;
  return std::nullopt;
}

bool is_gated(MoEActivation a) {
  const std::string v = row_of(a).value;
  const std::string suffix = "_no_mul";
  return !(v.size() >= suffix.size() && v.compare(v.size() - suffix.size(), suffix.size(), suffix) == 0);
}

bool apply_moe_activation_supported(MoEActivation a) { return a != MoEActivation::RELU2; }



std::optional<RoutingMethodType> parse_routing_method(const std::string& name) {
  for (const auto& row : kRoutingRows)
    if (lower(name) == lower(row.name)) return row.type;
  return std::nullopt;
}

RoutingMethodType get_routing_method_type(const std::string& scoring_func, bool renormalize, int num_expert_group,
                                          bool has_e_score_bias, std::optional<double> routed_scaling_factor) {
  if (scoring_func == "sqrtsoftplus") return renormalize ? RoutingMethodType::DeepseekV4 : RoutingMethodType::Unspecified;
  if (has_e_score_bias) {
    if (scoring_func != "sigmoid" || !renormalize) return RoutingMethodType::Unspecified;
    if (num_expert_group > 0) return RoutingMethodType::DeepSeekV3;
    // MiniMax-style routing only when the routed output is not rescaled.
    if (!routed_scaling_factor || *routed_scaling_factor == 1.0) return RoutingMethodType::MiniMax2;
    return RoutingMethodType::Unspecified;
  }
  if (scoring_func == "sigmoid") return renormalize ? RoutingMethodType::SigmoidRenorm : RoutingMethodType::Sigmoid;
  if (scoring_func == "softmax") return renormalize ? RoutingMethodType::RenormalizeNaive : RoutingMethodType::Default;
  return RoutingMethodType::Unspecified;
}

std::string float_type_torch_name(FloatType t) {
  switch (t) {
    case FloatType::float32: return "torch.float32";
    case FloatType::float16: return "torch.float16";
    case FloatType::bfloat16: return "torch.bfloat16";
  }
  return "torch.bfloat16";
}

std::string float_type_short_name(FloatType t) {
  switch (t) {
    case FloatType::float32: return "fp32";
    case FloatType::float16: return "fp16";
    case FloatType::bfloat16: return "bf16";
  }
  return "bf16";
}

std::optional<FloatType> parse_float_type(const std::string& s) {
  const std::string v = lower(s);
  if (v == "bf16" || v == "bfloat16" || v == "torch.bfloat16") return FloatType::bfloat16;
  if (v == "fp16" || v == "f16" || v == "float16" || v == "half" || v == "torch.float16") return FloatType::float16;
  if (v == "fp32" || v == "f32" || v == "float32" || v == "float" || v == "torch.float32") return FloatType::float32;
  return std::nullopt;
}

std::string activation_format_value_text(ActivationFormat f) {
  return f == ActivationFormat::Standard ? "('standard',)" : "('batched_experts',)";
}

}  // namespace moepack::oracle
