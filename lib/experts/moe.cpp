#include "lib/experts/moe.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "lib/core/parallel.h"

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


namespace {

// A weight matrix as the dot products read it: whole in float (row-major), or decoded a block
// of rows at a time, column-interleaved, into a scratch buffer that stays in the cache.
struct WeightRows {
  const float* dense = nullptr;
  const RowDequantizer* decoder = nullptr;
  uint64_t cols = 0;
};

constexpr uint64_t kBlockRows = 8, kTokenGroup = 4;

// acc[t][i] += w[k][i] * in_t[k] over every k in ascending order, for 8 column-interleaved rows
// and T tokens: each (t, i) is one chain of products and additions in the definition's order
// (the compiler vectorizes across i, which is not an order of additions).
template <uint64_t T, class In>
inline __attribute__((always_inline)) void interleaved_dots_body(const float* w, uint64_t cols, const In* const* in, double (*acc)[kBlockRows]) {
  for (uint64_t k = 0; k < cols; ++k) {
    const float* wk = w + k * kBlockRows;
    for (uint64_t t = 0; t < T; ++t) {
      const double xk = static_cast<double>(in[t][k]);
      for (uint64_t i = 0; i < kBlockRows; ++i) acc[t][i] += static_cast<double>(wk[i]) * xk;
    }
  }
}

template <class In>
void interleaved_dots_portable(const float* w, uint64_t cols, const In* const* in, uint64_t tokens, double (*acc)[kBlockRows]) {
  switch (tokens) {
    case 1: return interleaved_dots_body<1>(w, cols, in, acc);
    case 2: return interleaved_dots_body<2>(w, cols, in, acc);
    case 3: return interleaved_dots_body<3>(w, cols, in, acc);
    default: return interleaved_dots_body<4>(w, cols, in, acc);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// The same loop compiled for AVX2 (four doubles a vector; no FMA: the target adds none, and this
// file is built with -ffp-contract=off), chosen at run time.
template <class In>
__attribute__((target("avx2"))) void interleaved_dots_avx2(const float* w, uint64_t cols, const In* const* in, uint64_t tokens, double (*acc)[kBlockRows]) {
  switch (tokens) {
    case 1: return interleaved_dots_body<1>(w, cols, in, acc);
    case 2: return interleaved_dots_body<2>(w, cols, in, acc);
    case 3: return interleaved_dots_body<3>(w, cols, in, acc);
    default: return interleaved_dots_body<4>(w, cols, in, acc);
  }
}
bool have_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
#endif

template <class In>
void interleaved_dots(const float* w, uint64_t cols, const In* const* in, uint64_t tokens, double (*acc)[kBlockRows]) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (have_avx2()) return interleaved_dots_avx2(w, cols, in, tokens, acc);
#endif
  interleaved_dots_portable(w, cols, in, tokens, acc);
}

// The reference's dot products: y[t][r] = init[r] + sum over k of double(W[r][k]) * in_t[k], each
// sum taken in ascending k with one rounding per product and per addition (the definition's
// order; this file is built with -ffp-contract=off so no product and sum are fused), so the
// result is the same bits as a row-by-row loop. Speed comes from independent chains: eight rows
// at a time, each row's values read once for up to four tokens.
template <class In>
void rows_dot_inputs(const WeightRows& W, uint64_t rows, const double* init, const std::vector<const In*>& inputs, const std::vector<double*>& outputs) {
  const uint64_t tokens = inputs.size(), cols = W.cols;
  std::vector<float> scratch;
  for (uint64_t r0 = 0; r0 < rows; r0 += kBlockRows) {
    const uint64_t rn = std::min(kBlockRows, rows - r0);
    if (rn == kBlockRows && W.decoder) {
      scratch.resize(static_cast<size_t>(kBlockRows * cols));
      W.decoder->decode_interleaved(r0, kBlockRows, scratch.data());
      for (uint64_t t0 = 0; t0 < tokens; t0 += kTokenGroup) {
        const uint64_t tn = std::min(kTokenGroup, tokens - t0);
        double acc[kTokenGroup][kBlockRows];
        for (uint64_t t = 0; t < kTokenGroup; ++t)
          for (uint64_t i = 0; i < kBlockRows; ++i) acc[t][i] = init ? init[r0 + i] : 0.0;
        interleaved_dots(scratch.data(), cols, inputs.data() + t0, tn, acc);
        for (uint64_t t = 0; t < tn; ++t)
          for (uint64_t i = 0; i < kBlockRows; ++i) outputs[t0 + t][r0 + i] = acc[t][i];
      }
      continue;
    }
    const float* w = W.dense ? W.dense + r0 * cols : nullptr;
    if (!w) {
      scratch.resize(static_cast<size_t>(rn * cols));
      W.decoder->decode(r0, rn, scratch.data());
      w = scratch.data();
    }
    for (uint64_t t0 = 0; t0 < tokens; t0 += kTokenGroup) {
      const uint64_t tn = std::min(kTokenGroup, tokens - t0);
      if (rn < kBlockRows) {
        for (uint64_t i = 0; i < rn; ++i)
          for (uint64_t t = 0; t < tn; ++t) {
            const In* in = inputs[t0 + t];
            double acc = init ? init[r0 + i] : 0.0;
            for (uint64_t k = 0; k < cols; ++k) acc += static_cast<double>(w[i * cols + k]) * static_cast<double>(in[k]);
            outputs[t0 + t][r0 + i] = acc;
          }
        continue;
      }
      double acc[kTokenGroup][kBlockRows];
      for (uint64_t t = 0; t < kTokenGroup; ++t)
        for (uint64_t i = 0; i < kBlockRows; ++i) acc[t][i] = init ? init[r0 + i] : 0.0;
      for (uint64_t k = 0; k < cols; ++k) {
        double wk[kBlockRows];
        for (uint64_t i = 0; i < kBlockRows; ++i) wk[i] = static_cast<double>(w[i * cols + k]);
        for (uint64_t t = 0; t < tn; ++t) {
          const double xk = static_cast<double>(inputs[t0 + t][k]);
          for (uint64_t i = 0; i < kBlockRows; ++i) acc[t][i] += wk[i] * xk;
        }
      }
      for (uint64_t t = 0; t < tn; ++t)
        for (uint64_t i = 0; i < kBlockRows; ++i) outputs[t0 + t][r0 + i] = acc[t][i];
    }
  }
}

// One expert's contribution to its tokens: weight * (w2 . act(w13 . x_t + b13) + b2) per
// (token, slot) routed to it, [routes, H].
struct ExpertRoutes {
  std::vector<uint64_t> tokens;   // the tokens routed to the expert, ascending
  std::vector<double> weights;    // their routing weights
  std::vector<double> contribution;
};

void run_expert(const ExpertMatrices& m, const std::vector<float>& x, const MoeShape& shape, const ResolvedActivation& act, ExpertRoutes& routes) {
  const uint64_t H = shape.hidden, P = shape.inter, n13 = shape.gated ? 2 * P : P, n = routes.tokens.size();
  std::vector<double> bias13(m.w13_bias.begin(), m.w13_bias.end()), bias2(m.w2_bias.begin(), m.w2_bias.end());
  std::vector<double> h(static_cast<size_t>(n * n13)), a(static_cast<size_t>(n * P)), y(static_cast<size_t>(n * H));
  std::vector<const float*> xs;
  std::vector<const double*> as;
  std::vector<double*> hs, ys;
  for (uint64_t i = 0; i < n; ++i) {
    xs.push_back(x.data() + routes.tokens[i] * H);
    hs.push_back(h.data() + i * n13);
    as.push_back(a.data() + i * P);
    ys.push_back(y.data() + i * H);
  }
  rows_dot_inputs(WeightRows{m.w13_rows ? nullptr : m.w13.data(), m.w13_rows.get(), H}, n13, bias13.empty() ? nullptr : bias13.data(), xs, hs);
  for (uint64_t i = 0; i < n; ++i)
    for (uint64_t j = 0; j < P; ++j) {
      const auto [g, u] = shape.gated ? gate_and_up(hs[i], j, P, shape.rows) : std::pair<double, double>{hs[i][j], 0.0};
      a[i * P + j] = activation_value(act, g, u);
    }
  rows_dot_inputs(WeightRows{m.w2_rows ? nullptr : m.w2.data(), m.w2_rows.get(), P}, H, bias2.empty() ? nullptr : bias2.data(), as, ys);
  routes.contribution.resize(static_cast<size_t>(n * H));
  for (uint64_t i = 0; i < n; ++i)
    for (uint64_t r = 0; r < H; ++r) routes.contribution[i * H + r] = routes.weights[i] * y[i * H + r];
}

}  // namespace

void accumulate_experts(const std::vector<float>& x, uint64_t tokens, const Routing& routing, const ExpertSource& source, const MoeShape& shape,
                        const ActivationSpec& activation, std::vector<double>& out, int threads) {
  const ResolvedActivation act = resolve_activation(activation);
  if (act.gated != shape.gated)
    throw Error(ErrorKind::bad_input, "activation `" + activation.name + "` does not match " + (shape.gated ? "gated" : "non-gated") + " experts");
  const uint64_t H = shape.hidden, P = shape.inter, n13 = shape.gated ? 2 * P : P;
  if (x.size() != tokens * H || out.size() != tokens * H || routing.tokens != tokens) throw_internal("accumulate_experts: sizes");
  // The routed experts in ascending id, each with its (token, weight) pairs in token order.
  std::map<uint32_t, ExpertRoutes> by_expert;
  for (uint64_t t = 0; t < tokens; ++t)
    for (uint64_t j = 0; j < routing.top_k; ++j) {
      ExpertRoutes& r = by_expert[routing.ids[t * routing.top_k + j]];
      r.tokens.push_back(t);
      r.weights.push_back(routing.weights[t * routing.top_k + j]);
    }
  std::vector<std::pair<uint32_t, ExpertRoutes*>> experts;
  for (auto& [e, r] : by_expert) experts.emplace_back(e, &r);
  // Experts run in parallel a chunk at a time (one expert's float matrices per thread in
  // memory); their contributions are added to `out` in ascending expert id, the order a
  // one-thread run adds them, so the sums are the same bits for any thread count.
  const uint64_t chunk = static_cast<uint64_t>(std::max(1, threads)) * 2;
  for (uint64_t c0 = 0; c0 < experts.size(); c0 += chunk) {
    const uint64_t cn = std::min<uint64_t>(chunk, experts.size() - c0);
    std::vector<char> held(static_cast<size_t>(cn), 0);
    parallel_for_each_index(cn, threads, [&](uint64_t i) {
      const auto [e, routes] = experts[c0 + i];
      std::optional<ExpertMatrices> m = source(e);
      if (!m) return;
      const bool w13_fits = m->w13_rows ? m->w13_rows->rows() == n13 && m->w13_rows->cols() == H : m->w13.size() == n13 * H;
      const bool w2_fits = m->w2_rows ? m->w2_rows->rows() == H && m->w2_rows->cols() == P : m->w2.size() == H * P;
      if (!w13_fits || !w2_fits || (!m->w13_bias.empty() && m->w13_bias.size() != n13) || (!m->w2_bias.empty() && m->w2_bias.size() != H))
        throw Error(ErrorKind::bad_input, "expert " + std::to_string(e) + ": weights do not match the layer's sizes (hidden " + std::to_string(H) + ", intermediate " +
                                              std::to_string(P) + (shape.gated ? ", gated" : ", not gated") + ")");
      run_expert(*m, x, shape, act, *routes);
      held[i] = 1;
    });
    for (uint64_t i = 0; i < cn; ++i) {
      if (!held[i]) continue;
      ExpertRoutes& r = *experts[c0 + i].second;
      for (size_t k = 0; k < r.tokens.size(); ++k) {
        double* ot = out.data() + r.tokens[k] * H;
        const double* c = r.contribution.data() + k * H;
        for (uint64_t h = 0; h < H; ++h) ot[h] += c[h];
      }
      r.contribution = {};
    }
  }
}

}  // namespace moepack::experts
