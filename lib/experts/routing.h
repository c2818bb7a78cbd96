// vLLM's routing methods (RoutingMethodType, fused_moe/config.py and the router implementations
// at the reference): router logits [tokens, experts] -> for every token, top_k expert ids and
// the weights their outputs are summed with.
//
//   method            scores                    choice                               weights
//   Default           softmax(logits)           top-k scores                         scores
//   Renormalize       logits                    top-k logits                         softmax over the k
//   RenormalizeNaive  softmax(logits)           top-k scores                         scores / sum of the k
//   Sigmoid           sigmoid(logits)           top-k scores                         scores
//   SigmoidRenorm     sigmoid(logits)           top-k scores                         renormalized
//   DeepSeekV3        sigmoid(logits)           groups ranked by the sum of their    scores (no bias), renormalized
//                                               top-2 (scores + bias); top-k of the  when asked, x routed_scaling
//                                               kept groups' (scores + bias)
//   MiniMax2          sigmoid(logits)           top-k of scores + bias               scores, renormalized
//   Llama4            logits                    top-1 logit                          sigmoid(logit)
//   DeepseekV4        sqrt(softplus(logits))    top-k of scores + bias               scores / sum x routed_scaling
// Ties go to the lower expert id (torch.topk on CPU keeps the first).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moepack::experts {

struct RoutingSpec {
  std::string method = "RenormalizeNaive";  // RoutingMethodType member name
  uint64_t top_k = 1;
  uint64_t n_group = 0;                      // DeepSeekV3 grouped top-k; 0 = no groups
  uint64_t topk_group = 0;
  bool renormalize = true;                   // DeepSeekV3 / Sigmoid* only (the others fix it)
  double routed_scaling_factor = 1.0;
  std::vector<float> correction_bias;        // [experts] e_score_correction_bias, empty when none
};

struct Routing {
  uint64_t tokens = 0, top_k = 0;
  std::vector<uint32_t> ids;   // [tokens, top_k]
  std::vector<float> weights;  // [tokens, top_k]
};

// Throws Error(bad_input) for a method these experts do not implement, or parameters that
// cannot route (top_k above the number of experts, groups that do not divide the experts).
Routing route(const std::vector<float>& logits, uint64_t tokens, uint64_t experts, const RoutingSpec& spec);

// The methods route() implements, for messages and docs.
const std::vector<std::string>& routing_methods();

}  // namespace moepack::experts
