#include "lib/experts/moe.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "lib/core/error.h"

namespace moepack::experts {
namespace {

double silu(double x) { return x / (1.0 + std::exp(-x)); }
double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
double relu2(double x) { return x > 0 ? x * x : 0.0; }

double gated_activation(const ActivationSpec& a, double g, double u) {
  if (a.name == "swigluoai") {
    const double limit = a.swiglu_limit.value_or(7.0), alpha = a.swiglu_alpha.value_or(1.702), beta = a.swiglu_beta.value_or(1.0);
    g = std::min(g, limit);
    u = std::clamp(u, -limit, limit);
    return (u + beta) * g / (1.0 + std::exp(-alpha * g));
  }
  if (a.swiglu_limit) {  // the clamped SiLU of DeepSeek-V4's experts (vLLM's activation_clamp)
    g = std::min(g, *a.swiglu_limit);
    u = std::clamp(u, -*a.swiglu_limit, *a.swiglu_limit);
  }
  if (a.name == "silu") return silu(g) * u;
  if (a.name == "gelu") return gelu_erf(g) * u;
  if (a.name == "gelu_tanh") return gelu_tanh(g) * u;
  if (a.name == "relu2") return relu2(g) * u;
  throw_internal("gated_activation: " + a.name);
}

double ungated_activation(const std::string& name, double x) {
  if (name == "silu_no_mul") return silu(x);
  if (name == "gelu_no_mul") return gelu_erf(x);
  if (name == "gelu_tanh_no_mul") return gelu_tanh(x);
  if (name == "relu2_no_mul") return relu2(x);
  throw_internal("ungated_activation: " + name);
}

}  // namespace

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

double activation_value(const ActivationSpec& a, bool gated, double g, double u) { return gated ? gated_activation(a, g, u) : ungated_activation(a.name, g); }

void check_activation(const ActivationSpec& a) {
  static const std::set<std::string> known = {"silu", "gelu", "gelu_tanh", "relu2", "swigluoai", "silu_no_mul", "gelu_no_mul", "gelu_tanh_no_mul", "relu2_no_mul"};
  if (!known.count(a.name))
    throw Error(ErrorKind::bad_input, "activation `" + a.name + "` is not implemented by the runtime experts (known: silu, gelu, gelu_tanh, relu2, swigluoai and their _no_mul forms)");
}

void accumulate_experts(const std::vector<float>& x, uint64_t tokens, const Routing& routing, const ExpertSource& source, const MoeShape& shape,
                        const ActivationSpec& activation, std::vector<double>& out) {
  check_activation(activation);
  if (is_gated_activation(activation.name) != shape.gated)
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
          a[i] = activation_value(activation, shape.gated, g, u);
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
