// The reference fused MoE: for every token, the routed experts' outputs weighted and summed,
// computed from float weights with double accumulation. The same function runs the source's
// weights (the reference) and the weights unpacked from an artifact rank by rank (the emulation
// of a packed layout), so the two differ only by the order of additions.
//
//   x [T, H] --w13 (+bias)--> h [T, N13] --activation--> a [T, P] --w2 (+bias)--> y [T, H]
//   out[t] += routing weight · y[t] over the token's experts
//
// N13 is 2P for gated activations (gate and up rows in the order `W13Rows` names) and P for the
// *_no_mul ones. Activations as vLLM's MoEActivation defines them (fused_moe/activation.py and
// layers/activation.py at the reference):
//   silu        silu(g) · u                 (with swiglu_limit: g clamped above, u to ±limit)
//   gelu        gelu_erf(g) · u             gelu_tanh   gelu_tanh(g) · u
//   relu2       relu(g)² · u
//   swigluoai   g' = min(g, limit), u' = clamp(u, ±limit): (u' + beta) · g' · sigmoid(alpha · g')
//               (alpha 1.702, beta 1, limit 7 unless the model says otherwise)
//   *_no_mul    the activation of the single row block: silu(h), gelu(h), relu(h)²
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lib/experts/dequant.h"
#include "lib/experts/routing.h"

namespace moepack::experts {

// Order of the gate and up rows inside w13 (docs/ARTIFACT.md `w13_rows`).
enum class W13Rows { gate_up_halves, interleaved, up_gate_halves };
std::string_view w13_rows_name(W13Rows r);
std::optional<W13Rows> parse_w13_rows(std::string_view name);

struct ActivationSpec {
  std::string name = "silu";  // MoEActivation value
  std::optional<double> swiglu_limit;
  std::optional<double> swiglu_alpha;
  std::optional<double> swiglu_beta;
};
bool is_gated_activation(const std::string& name);

// An ActivationSpec resolved once per layer (names compared once, defaults filled in), so the
// per-element function below is a switch. Throws Error(bad_input) for an activation the runtime
// experts do not implement.
enum class ActivationKind { silu, gelu, gelu_tanh, relu2, swigluoai };
struct ResolvedActivation {
  ActivationKind kind = ActivationKind::silu;
  bool gated = true;
  bool clamp = false;  // swigluoai, or a model's swiglu_limit on silu (DeepSeek-V4's activation_clamp)
  double limit = 7.0, alpha = 1.702, beta = 1.0;
};
ResolvedActivation resolve_activation(const ActivationSpec& a);

// The activation of one intermediate column: of gate `g` and up `u` for gated activations, of
// the single value `g` for the *_no_mul ones. Every expert implementation computes it here, in
// its own precision (double for the reference, float for the fast CPU kernels).
template <typename T>
T activation_value(const ResolvedActivation& a, T g, T u) {
  const T limit = static_cast<T>(a.limit);
  if (a.gated && a.clamp) {
    g = std::min(g, limit);
    u = std::clamp(u, -limit, limit);
  }
  T v = T(0);
  switch (a.kind) {
    case ActivationKind::swigluoai: return (u + static_cast<T>(a.beta)) * g / (T(1) + std::exp(-static_cast<T>(a.alpha) * g));
    case ActivationKind::silu: v = g / (T(1) + std::exp(-g)); break;
    case ActivationKind::gelu: v = T(0.5) * g * (T(1) + std::erf(g / std::sqrt(T(2)))); break;
    case ActivationKind::gelu_tanh: v = T(0.5) * g * (T(1) + std::tanh(std::sqrt(T(2) / static_cast<T>(M_PI)) * (g + T(0.044715) * g * g * g))); break;
    case ActivationKind::relu2: v = g > 0 ? g * g : T(0); break;
  }
  return a.gated ? v * u : v;
}

// Gate and up of intermediate column j inside one token's w13 output `h` (2P values).
template <typename T>
std::pair<T, T> gate_and_up(const T* h, uint64_t j, uint64_t P, W13Rows rows) {
  switch (rows) {
    case W13Rows::interleaved: return {h[2 * j], h[2 * j + 1]};
    case W13Rows::up_gate_halves: return {h[P + j], h[j]};
    case W13Rows::gate_up_halves: break;
  }
  return {h[j], h[P + j]};
}

// One expert's float weights (one rank's slice, at that rank's padded sizes).
struct ExpertMatrices {
  std::vector<float> w13;       // [n13, hidden]
  std::vector<float> w13_bias;  // [n13] or empty
  std::vector<float> w2;        // [hidden, inter]
  std::vector<float> w2_bias;   // [hidden] or empty
  // Instead of w13 / w2 (then left empty): the same values decoded a block of rows at a time
  // while the dot products read them, so no expert is ever whole in float.
  std::shared_ptr<const RowDequantizer> w13_rows, w2_rows;
};

struct MoeShape {
  uint64_t hidden = 0;  // columns of w13, rows of w2
  uint64_t inter = 0;   // P: rows of one w13 half, columns of w2
  bool gated = true;
  W13Rows rows = W13Rows::gate_up_halves;
};

// Supplies expert `e` (global id) when this computation holds it, nullopt otherwise (another
// expert-parallel rank). Called once per routed expert; with several threads, concurrently for
// different experts (so it must be safe to), and never for more than 2 x threads at a time, so
// only that many experts' weights are in memory at once.
using ExpertSource = std::function<std::optional<ExpertMatrices>(uint64_t expert)>;

// Adds every token's weighted expert outputs into `out` [T, shape.hidden] (double). `x` is
// [T, shape.hidden]. Throws Error(bad_input) when a supplied expert's sizes disagree with `shape`
// (the lowest such expert). Every dot product is summed in ascending order and the experts'
// outputs are added in ascending expert id, so `out` is the same bits for any `threads`.
void accumulate_experts(const std::vector<float>& x, uint64_t tokens, const Routing& routing, const ExpertSource& source, const MoeShape& shape,
                        const ActivationSpec& activation, std::vector<double>& out, int threads = 1);

}  // namespace moepack::experts
