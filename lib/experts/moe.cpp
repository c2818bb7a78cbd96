#include "lib/experts/moe.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "lib/core/error.h"

namespace moepack::experts {
std::string_view w13_rows_name(W13Rows r) {
  switch (r) {
    case W13Rows::gate_up_halves: return "gate_up_halves";
    case W13Rows::interleaved: return "interleaved";
    case W13Rows::up_gate_halves: return "up_gate_halves";
  }
  return "";
}

std::optional<W13Rows> parse_w13_rows(std::string_view name) {
  for (W13Rows r : {W13Rows::gate_up_halves, W13Rows::interleaved, W13Rows::up_gate_halves})
    if (w13_rows_name(r) == name) return r;
  return std::nullopt;
}

bool is_gated_activation(const std::string& name) { return !name.ends_with("_no_mul"); }

ResolvedActivation resolve_activation(const ActivationSpec& a) {
  static const std::pair<const char*, ActivationKind> kinds[] = {{"silu", ActivationKind::silu},   {"gelu", ActivationKind::gelu},
                                                                 {"gelu_tanh", ActivationKind::gelu_tanh}, {"relu2", ActivationKind::relu2},
                                                                 {"swigluoai", ActivationKind::swigluoai}};
  ResolvedActivation r;
  r.gated = is_gated_activation(a.name);
  const std::string base = r.gated ? a.name : a.name.substr(0, a.name.size() - std::string("_no_mul").size());
  const auto* found = std::find_if(std::begin(kinds), std::end(kinds), [&](const auto& k) { return base == k.first; });
  if (found == std::end(kinds) || (!r.gated && found->second == ActivationKind::swigluoai))
    throw Error(ErrorKind::bad_input, "activation `" + a.name + "` is not implemented by the runtime experts (known: silu, gelu, gelu_tanh, relu2, swigluoai and their _no_mul forms)");
  r.kind = found->second;
  r.clamp = r.kind == ActivationKind::swigluoai || (r.gated && a.swiglu_limit.has_value());
  r.limit = a.swiglu_limit.value_or(7.0);
  r.alpha = a.swiglu_alpha.value_or(1.702);
  r.beta = a.swiglu_beta.value_or(1.0);
  return r;
}

void check_activation(const ActivationSpec& a) { resolve_activation(a); }

void accumulate_experts(const std::vector<float>& x, uint64_t tokens, const Routing& routing, const ExpertSource& source, const MoeShape& shape,
                        const ActivationSpec& activation, std::vector<double>& out) {
  const ResolvedActivation act = resolve_activation(activation);
  if (act.gated != shape.gated)
    throw Error(ErrorKind::bad_input, "activation `" + activation.name + "` does not match " + (shape.gated ? "gated" : "non-gated") + " experts");
  const uint64_t H = shape.hidden, P = shape.inter, n13 = shape.gated ? 2 * P : P;
  if (x.size() != tokens * H || out.size() != tokens * H || routing.tokens != tokens) throw_internal("accumulate_experts: sizes");
  std::set<uint32_t> routed(routing.ids.begin(), routing.ids.end());
  std::vector<double> h(static_cast<size_t>(n13)), a(static_cast<size_t>(P));
  for (uint32_t e : routed) {
    std::optional<ExpertMatrices> m = source(e);
    if (!m) continue;
    if (m->w13.size() != n13 * H || m->w2.size() != H * P || (!m->w13_bias.empty() && m->w13_bias.size() != n13) || (!m->w2_bias.empty() && m->w2_bias.size() != H))
      throw Error(ErrorKind::bad_input, "expert " + std::to_string(e) + ": weights do not match the layer's sizes (hidden " + std::to_string(H) + ", intermediate " + std::to_string(P) +
                                            (shape.gated ? ", gated" : ", not gated") + ")");
    for (uint64_t t = 0; t < tokens; ++t) {
      for (uint64_t j = 0; j < routing.top_k; ++j) {
        if (routing.ids[t * routing.top_k + j] != e) continue;
        const double weight = routing.weights[t * routing.top_k + j];
        const float* xt = x.data() + t * H;
        for (uint64_t r = 0; r < n13; ++r) {
          const float* row = m->w13.data() + r * H;
          double acc = m->w13_bias.empty() ? 0.0 : m->w13_bias[r];
          for (uint64_t k = 0; k < H; ++k) acc += static_cast<double>(row[k]) * xt[k];
          h[r] = acc;
        }
        for (uint64_t i = 0; i < P; ++i) {
          const auto [g, u] = shape.gated ? gate_and_up(h.data(), i, P, shape.rows) : std::pair<double, double>{h[i], 0.0};
          a[i] = activation_value(act, g, u);
        }
        double* ot = out.data() + t * H;
        for (uint64_t r = 0; r < H; ++r) {
          const float* row = m->w2.data() + r * P;
          double acc = m->w2_bias.empty() ? 0.0 : m->w2_bias[r];
          for (uint64_t i = 0; i < P; ++i) acc += static_cast<double>(row[i]) * a[i];
          ot[r] += weight * acc;
        }
      }
    }
  }
}

}  // namespace moepack::experts
