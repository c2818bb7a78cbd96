// `moepack run`: one MoE layer of an artifact on hidden states the caller gives, through the
// runtime experts (artifact_runtime.h), so a user can feed an artifact the activations of a
// real model and compare with what an engine computes.
//
// Input, a safetensors file (moepack-run(1)):
//   hidden_states   F32, BF16 or F16   [tokens, hidden]       finite
//   router_logits   F32, BF16 or F16   [tokens, experts]      finite; routed as the manifest says
//   or, to bypass the router, both of
//   topk_ids        I32 or I64         [tokens, k]            0 <= id < experts, distinct per token
//   topk_weights    F32                [tokens, k]            finite
// Other tensors are ignored. Giving router_logits and topk_ids together is an error.
// Output, a safetensors file written atomically:
//   output          F32   [tokens, hidden]
//   topk_ids        I32   [tokens, k]      the experts used (routed or given)
//   topk_weights    F32   [tokens, k]
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moepack::runtime {

struct RunOptions {
  std::string artifact;
  std::string input;
  std::string output;
  std::optional<std::string> layer;  // required when the artifact has several MoE layers
};

struct RunReport {
  std::string layer, family, backend;
  std::string routing;         // "router_logits" or "topk_ids"
  std::string routing_method;  // the manifest's method ("given" when topk_ids bypassed it)
  std::string hidden_dtype;
  uint64_t tokens = 0, hidden_size = 0, num_experts = 0, top_k = 0, ranks = 1;
  double max_abs_output = 0;
  uint64_t nonfinite_outputs = 0;
};

// Throws Error(usage) when --layer is missing for an artifact with several layers or names no
// layer, Error(bad_input) for an input that breaks the contract above (naming the file, the
// tensor and the rule) or a layer the runtime experts cannot run, Error(io) when the output
// cannot be written (nothing is left behind).
RunReport run_layer(const RunOptions& options);

}  // namespace moepack::runtime
