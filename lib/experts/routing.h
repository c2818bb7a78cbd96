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
//   DeepseekV4, hash  sqrt(softplus(logits))    tid2eid[token id] (the table's row   scores / sum x routed_scaling
//   layers                                      for the token, no bias)
// (the hash layers: DeepSeek-V4's first num_hash_layers MoE layers; vLLM's
// topk_hash_softplus_sqrt op, whose torch reference is tests/kernels/moe/
// test_topk_softplus_sqrt.py `_torch_topk_softplus_sqrt` @ e9d1398d9.)
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
  // DeepSeek-V4 hash layers: the gate's tid2eid table [vocab, top_k] of expert ids, row-major;
  // empty for logit-routed layers. Routing then needs every token's id.
  std::vector<int64_t> hash_table;
};

struct Routing {
  uint64_t tokens = 0, top_k = 0;
  std::vector<uint32_t> ids;   // [tokens, top_k]
  std::vector<float> weights;  // [tokens, top_k]
};

// Throws Error(bad_input) for a method these experts do not implement, or parameters that
// cannot route (top_k above the number of experts, groups that do not divide the experts).
// `token_ids` ([tokens]) are read only by hash layers, which throw Error(bad_input) without them
// or for an id outside the table, or a table entry that names no expert.
Routing route(const std::vector<float>& logits, uint64_t tokens, uint64_t experts, const RoutingSpec& spec,
              const std::vector<int64_t>* token_ids = nullptr);

// The methods route() implements, for messages and docs.
const std::vector<std::string>& routing_methods();

}  // namespace moepack::experts
