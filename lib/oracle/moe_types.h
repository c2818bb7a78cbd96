// MoE activations, routing methods and the model dtype: the non-quantization half of what a
// kernel capability check looks at (vllm/model_executor/layers/fused_moe/activation.py and
// config.py @ e9d1398d9).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace moepack::oracle {

enum class MoEActivation {
  SILU,
  GELU,
  GELU_TANH,
  RELU2,
  SWIGLUOAI,               // gpt-oss SwiGLU, gate/up rows interleaved
  SITU,                    // Kimi SiTU
  SWIGLUOAI_UNINTERLEAVE,  // SwiGLU-OAI on packed [gates; ups]
  SWIGLUSTEP,
  SILU_NO_MUL,
  GELU_NO_MUL,
  GELU_TANH_NO_MUL,
  RELU2_NO_MUL,
};

// vLLM's value string ("silu", "swigluoai", "relu2_no_mul").
std::string activation_value(MoEActivation a);
// The enum member spelling Python prints for the activation ("MoEActivation.SILU").
std::string activation_repr(MoEActivation a);
// Parses a value string, accepting vLLM's alias gelu_pytorch_tanh -> gelu_tanh. nullopt if unknown.
std::optional<MoEActivation> parse_activation(const std::string& s);
// Gated activations multiply activation(gate) by up; only the *_no_mul ones are not gated.
bool is_gated(MoEActivation a);
// The set `apply_moe_activation` implements (Marlin, Triton, CUTLASS FP4, Humming use it).
// Gated RELU2 is deliberately not in it.
bool apply_moe_activation_supported(MoEActivation a);

enum class RoutingMethodType : int {
  Default = 0,
  Renormalize = 1,
  DeepSeekV3 = 2,
  Llama4 = 3,
  RenormalizeNaive = 4,
  TopK = 5,
  SigmoidRenorm = 6,
  MiniMax2 = 7,
  Sigmoid = 8,
  Unspecified = 9,
  DeepseekV4 = 100,
  Custom = 101,
  Simulated = 102,
};

std::optional<RoutingMethodType> parse_routing_method(const std::string& name);

// vLLM's derivation of the routing method from a model's router settings
// (config.py get_routing_method_type). `routed_scaling_factor` nullopt is Python's None.
RoutingMethodType get_routing_method_type(const std::string& scoring_func, bool renormalize, int num_expert_group,
                                          bool has_e_score_bias, std::optional<double> routed_scaling_factor);

// Floating-point dtypes of activations and router logits.
enum class FloatType { float32, float16, bfloat16 };
std::string float_type_torch_name(FloatType t);  // "torch.bfloat16"
std::string float_type_short_name(FloatType t);  // "bf16"
std::optional<FloatType> parse_float_type(const std::string& s);  // bf16/bfloat16/fp16/float16/half/fp32/float32

// Whether the experts receive tokens as one [tokens, hidden] matrix or per-expert batches
// (DeepEP low-latency and NIXL-EP dispatch).
enum class ActivationFormat { Standard, BatchedExperts };
// The text Python prints for `activation_format.value` (the enum values are 1-tuples).
std::string activation_format_value_text(ActivationFormat f);

}  // namespace moepack::oracle
