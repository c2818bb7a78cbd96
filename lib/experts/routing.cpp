#include "lib/experts/routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "lib/core/error.h"

namespace moepack::experts {
namespace {

// Indices of the k largest values, largest first; equal values keep the lower index first.
std::vector<uint32_t> top_indices(const std::vector<double>& v, uint64_t k) {
  std::vector<uint32_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0u);
  std::stable_sort(idx.begin(), idx.end(), [&](uint32_t a, uint32_t b) { return v[a] > v[b]; });
  idx.resize(static_cast<size_t>(k));
  return idx;
}

std::vector<double> softmax(const float* x, uint64_t n) {
  double m = -INFINITY;
  for (uint64_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(x[i]));
  std::vector<double> out(static_cast<size_t>(n));
  double sum = 0;
  for (uint64_t i = 0; i < n; ++i) sum += out[i] = std::exp(static_cast<double>(x[i]) - m);
  for (auto& v : out) v /= sum;
  return out;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double softplus(double x) { return x > 20 ? x : std::log1p(std::exp(x)); }

void renormalize(std::vector<double>& w) {
  double s = 0;
  for (double x : w) s += x;
  if (s != 0)
    for (double& x : w) x /= s;
}

// DeepSeek-V3 grouped choice: the groups with the best scores (sum of their top two biased
// scores, or their best score without a bias), then the best experts inside those groups.
std::vector<uint32_t> grouped_choice(const std::vector<double>& choice, bool biased, const RoutingSpec& s) {
  const uint64_t E = choice.size(), G = s.n_group, per = E / G;
  std::vector<double> group_score(static_cast<size_t>(G));
  for (uint64_t g = 0; g < G; ++g) {
    std::vector<double> members(choice.begin() + static_cast<std::ptrdiff_t>(g * per), choice.begin() + static_cast<std::ptrdiff_t>((g + 1) * per));
    std::sort(members.rbegin(), members.rend());
    group_score[g] = biased ? members[0] + (per > 1 ? members[1] : 0.0) : members[0];
  }
  std::vector<uint32_t> groups = top_indices(group_score, s.topk_group);
  std::vector<double> masked(static_cast<size_t>(E), -INFINITY);
  for (uint32_t g : groups)
    for (uint64_t e = g * per; e < (g + 1) * per; ++e) masked[e] = choice[e];
  return top_indices(masked, s.top_k);
}

}  // namespace

const std::vector<std::string>& routing_methods() {
  static const std::vector<std::string> m = {"Default", "Renormalize", "RenormalizeNaive", "Sigmoid", "SigmoidRenorm", "DeepSeekV3", "MiniMax2", "Llama4", "DeepseekV4"};
  return m;
}

namespace {

// A routing of `tokens` x `k` slots, to be filled.
Routing empty_routing(uint64_t tokens, uint64_t k) {
  Routing r;
  r.tokens = tokens;
  r.top_k = k;
  r.ids.resize(static_cast<size_t>(tokens * k));
  r.weights.resize(static_cast<size_t>(tokens * k));
  return r;
}

// DeepSeek-V4's hash layers: the experts come from the table row of each token's id, weighted
// by their sqrt(softplus) scores (the correction bias plays no part), renormalized over the k
// and scaled.
Routing hash_route(const std::vector<float>& logits, uint64_t tokens, uint64_t experts, const RoutingSpec& s, const std::vector<int64_t>* token_ids) {
  if (s.method != "DeepseekV4") throw Error(ErrorKind::bad_input, "routing: a tid2eid hash table routes DeepSeek-V4 (sqrtsoftplus) layers only, not " + s.method);
  const uint64_t k = s.top_k;
  if (k == 0 || s.hash_table.size() % k != 0) throw Error(ErrorKind::bad_input, "routing: the tid2eid table does not hold rows of top_k = " + std::to_string(k) + " ids");
  const uint64_t vocab = s.hash_table.size() / k;
  if (!token_ids) throw Error(ErrorKind::bad_input, "routing: this layer routes by token id (DeepSeek-V4 hash MoE, vLLM: \"hash MoE routing requires input_ids\"): give input_ids");
  if (token_ids->size() != tokens) throw Error(ErrorKind::bad_input, "routing: " + std::to_string(token_ids->size()) + " token ids for " + std::to_string(tokens) + " tokens");
  Routing r = empty_routing(tokens, k);
  for (uint64_t t = 0; t < tokens; ++t) {
    const int64_t id = (*token_ids)[t];
    if (id < 0 || static_cast<uint64_t>(id) >= vocab)
      throw Error(ErrorKind::bad_input, "routing: token id " + std::to_string(id) + " (token " + std::to_string(t) + ") is outside the tid2eid table's " + std::to_string(vocab) + " rows");
    std::vector<double> w(static_cast<size_t>(k));
    for (uint64_t j = 0; j < k; ++j) {
      const int64_t e = s.hash_table[static_cast<size_t>(static_cast<uint64_t>(id) * k + j)];
      if (e < 0 || static_cast<uint64_t>(e) >= experts)
        throw Error(ErrorKind::bad_input, "routing: tid2eid row " + std::to_string(id) + " names expert " + std::to_string(e) + " of " + std::to_string(experts));
      r.ids[t * k + j] = static_cast<uint32_t>(e);
      w[j] = std::sqrt(softplus(logits[t * experts + static_cast<uint64_t>(e)]));
    }
    renormalize(w);
    for (uint64_t j = 0; j < k; ++j) r.weights[t * k + j] = static_cast<float>(w[j] * s.routed_scaling_factor);
  }
  return r;
}

}  // namespace

Routing route(const std::vector<float>& logits, uint64_t tokens, uint64_t experts, const RoutingSpec& s, const std::vector<int64_t>* token_ids) {
  if (!s.hash_table.empty()) {
    if (logits.size() != tokens * experts) throw_internal("route: logits size");
    return hash_route(logits, tokens, experts, s, token_ids);
  }
  const auto& known = routing_methods();
  if (std::find(known.begin(), known.end(), s.method) == known.end())
    throw Error(ErrorKind::bad_input, "routing method `" + s.method + "` is not implemented by the runtime experts (known: Default, Renormalize, RenormalizeNaive, Sigmoid, "
                                      "SigmoidRenorm, DeepSeekV3, MiniMax2, Llama4, DeepseekV4)");
  const uint64_t k = s.method == "Llama4" ? 1 : s.top_k;
  if (k == 0 || k > experts) throw Error(ErrorKind::bad_input, "routing: top_k " + std::to_string(k) + " for " + std::to_string(experts) + " experts");
  if (logits.size() != tokens * experts) throw_internal("route: logits size");
  if (!s.correction_bias.empty() && s.correction_bias.size() != experts)
    throw Error(ErrorKind::bad_input, "routing: the correction bias has " + std::to_string(s.correction_bias.size()) + " entries for " + std::to_string(experts) + " experts");
  const bool grouped = s.method == "DeepSeekV3" && s.n_group > 1;
  if (grouped && (experts % s.n_group || s.topk_group == 0 || s.topk_group > s.n_group || s.topk_group * (experts / s.n_group) < k))
    throw Error(ErrorKind::bad_input, "routing: " + std::to_string(s.n_group) + " groups / top " + std::to_string(s.topk_group) + " groups cannot route " + std::to_string(experts) +
                                          " experts top-" + std::to_string(k));
  Routing r = empty_routing(tokens, k);
  for (uint64_t t = 0; t < tokens; ++t) {
    const float* x = logits.data() + t * experts;
    std::vector<double> scores(static_cast<size_t>(experts));
    std::vector<uint32_t> ids;
    std::vector<double> w;
    const std::string& m = s.method;
    if (m == "Default" || m == "RenormalizeNaive") {
      scores = softmax(x, experts);
      ids = top_indices(scores, k);
      for (uint32_t e : ids) w.push_back(scores[e]);
      if (m == "RenormalizeNaive") renormalize(w);
    } else if (m == "Renormalize") {
      for (uint64_t e = 0; e < experts; ++e) scores[e] = x[e];
      ids = top_indices(scores, k);
      std::vector<float> chosen;
      for (uint32_t e : ids) chosen.push_back(x[e]);
      w = softmax(chosen.data(), k);
    } else if (m == "Llama4") {
      for (uint64_t e = 0; e < experts; ++e) scores[e] = x[e];
      ids = top_indices(scores, 1);
      w = {sigmoid(x[ids[0]])};
    } else {
      // Sigmoid-family scores, optionally chosen with a correction bias.
      for (uint64_t e = 0; e < experts; ++e) scores[e] = m == "DeepseekV4" ? std::sqrt(softplus(x[e])) : sigmoid(x[e]);
      std::vector<double> choice = scores;
      const bool biased = !s.correction_bias.empty() && (m == "DeepSeekV3" || m == "MiniMax2" || m == "DeepseekV4");
      if (biased)
        for (uint64_t e = 0; e < experts; ++e) choice[e] += s.correction_bias[e];
      ids = grouped ? grouped_choice(choice, biased, s) : top_indices(choice, k);
      for (uint32_t e : ids) w.push_back(scores[e]);
      const bool renorm = m == "SigmoidRenorm" || m == "MiniMax2" || m == "DeepseekV4" || (m == "DeepSeekV3" && s.renormalize);
      if (renorm) renormalize(w);
      if (m == "DeepSeekV3" || m == "DeepseekV4")
        for (double& v : w) v *= s.routed_scaling_factor;
    }
    for (uint64_t j = 0; j < k; ++j) {
      r.ids[t * k + j] = ids[j];
      r.weights[t * k + j] = static_cast<float>(w[j]);
    }
  }
  return r;
}

}  // namespace moepack::experts
