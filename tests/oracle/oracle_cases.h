// Shared builders for the oracle decision tables: real model shapes as layer queries, targets
// with deployment tweaks, and one expectation row type so each family's whole policy reads as
// one table.
#pragma once

#include <cctype>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lib/oracle/oracle.h"

namespace moepack::oracle::test {

// gpt-oss-120b experts: hidden = intermediate = 2880, 128 experts, top-4, SwiGLU-OAI with
// biases and a clamp of 7, softmax + renormalize routing.
inline MoeLayerQuery gpt_oss() {
  MoeLayerQuery q;
  q.prefix = "model.layers.0.mlp.experts";
  q.family = Family::mxfp4;
  q.quant_method = "gpt_oss_mxfp4";
  q.model_type = "gpt_oss";
  q.weight_key = "kMxfp4Static";
  q.hidden_size = 2880;
  q.moe_intermediate_size = 2880;
  q.num_experts = 128;
  q.top_k = 4;
  q.activation = "swigluoai";
  q.routing = RoutingMethodType::RenormalizeNaive;
  q.has_bias = true;
  q.swiglu_limit = 7.0;
  return q;
}

// Qwen3-30B-A3B experts: hidden 2048, intermediate 768, 128 experts, top-8, SiLU.
inline MoeLayerQuery qwen3(Family family, const std::string& quant_method) {
  MoeLayerQuery q;
  q.prefix = "model.layers.0.mlp.experts";
  q.family = family;
  q.quant_method = quant_method;
  q.model_type = "qwen3_moe";
  q.hidden_size = 2048;
  q.moe_intermediate_size = 768;
  q.num_experts = 128;
  q.top_k = 8;
  q.activation = "silu";
  q.routing = RoutingMethodType::RenormalizeNaive;
  return q;
}

// DeepSeek-V3 experts: hidden 7168, intermediate 2048, 256 experts, top-8, grouped sigmoid routing.
inline MoeLayerQuery deepseek_v3(Family family, const std::string& quant_method) {
  MoeLayerQuery q = qwen3(family, quant_method);
  q.model_type = "deepseek_v3";
  q.hidden_size = 7168;
  q.moe_intermediate_size = 2048;
  q.num_experts = 256;
  q.top_k = 8;
  q.routing = RoutingMethodType::DeepSeekV3;
  return q;
}

// DeepSeek-V4-Flash-like MXFP4 experts (Mxfp4MoEMethod via deepseek_v4_fp8): hidden 4096,
// intermediate 2048, 256 experts, sqrtsoftplus routing with renormalisation.
inline MoeLayerQuery deepseek_v4() {
  MoeLayerQuery q = qwen3(Family::mxfp4, "deepseek_v4_fp8");
  q.model_type = "deepseek_v4";
  q.weight_key = "kMxfp4Static";
  q.hidden_size = 4096;
  q.moe_intermediate_size = 2048;
  q.num_experts = 256;
  q.top_k = 6;
  q.routing = RoutingMethodType::DeepseekV4;
  return q;
}

using Tweak = std::function<void(Deployment&)>;

inline Deployment target(const std::string& name, const Tweak& tweak = nullptr) {
  Deployment d = default_deployment(parse_target(name));
  if (tweak) tweak(d);
  return d;
}

// Common deployment tweaks.
inline Tweak tp(int n) {
  return [n](Deployment& d) { d.parallel.tp = n; };
}
inline Tweak env(const std::string& k, const std::string& v) {
  return [k, v](Deployment& d) { d.env.set(k, v); };
}
inline Tweak backend(const std::string& b) {
  return [b](Deployment& d) { d.moe_backend = normalize_moe_backend(b); };
}
inline Tweak deepep_low_latency() {
  return [](Deployment& d) {
    d.parallel.dp = 2;
    d.parallel.enable_expert_parallel = true;
    d.parallel.all2all_backend = "deepep_low_latency";
  };
}
inline Tweak all(std::vector<Tweak> tweaks) {
  return [tweaks](Deployment& d) {
    for (const auto& t : tweaks) t(d);
  };
}

// One row of a decision table. `name` is the vLLM code path the row exercises.
struct Case {
  std::string name;
  MoeLayerQuery query;
  Deployment deployment;
  std::string backend;        // expected enum member ("" when refused)
  std::string experts_class;  // expected class ("" when refused or not checked)
  std::string error_type;     // expected exception type ("" when selected)
  std::string error_text;     // substring the message must contain
};

inline void check_case(const Case& c) {
  SCOPED_TRACE(c.name);
  const Decision d = decide(c.query, c.deployment);
  if (c.error_type.empty()) {
    ASSERT_FALSE(d.error.has_value()) << d.error->type << ": " << d.error->message;
    ASSERT_TRUE(d.backend.has_value());
    EXPECT_EQ(*d.backend, c.backend);
    if (!c.experts_class.empty()) {
      ASSERT_TRUE(d.experts_class.has_value());
      EXPECT_EQ(*d.experts_class, c.experts_class);
    }
  } else {
    ASSERT_TRUE(d.error.has_value()) << "selected " << d.backend.value_or("-") << " / " << d.experts_class.value_or("-");
    EXPECT_EQ(d.error->type, c.error_type);
    EXPECT_NE(d.error->message.find(c.error_text), std::string::npos) << d.error->message;
    EXPECT_FALSE(d.backend.has_value());
  }
}

inline std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string s;
  for (char ch : info.param.name) s += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return s;
}

}  // namespace moepack::oracle::test
