// The fast CPU experts' layer driver (cpu_experts.h): the instruction-set list, routing tokens to
// experts, BF16 activations, the activation function, workspace and threads. The GEMMs are the
// shared kernels of cpu_gemm.h over each layout's tile policy (cpu_tiles.cpp).
#include "lib/experts/cpu_experts.h"

#include "lib/experts/cpu_gemm.h"

#include <algorithm>
#include <cstdlib>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include "lib/core/codecs.h"
#include "lib/core/error.h"

namespace moepack::experts {
namespace {

MOEPACK_AVX512_BF16 void to_bf16_avx512(const float* in, uint16_t* out, uint64_t n) {
  uint64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(in + i)));
  for (; i < n; ++i) out[i] = float_to_bf16(in[i]);
}

// `in` rounded to BF16 into `out`; with `widened`, the rounded values back as floats too (the
// AVX2 and portable kernels read floats).
void to_bf16(CpuIsa isa, const float* in, uint16_t* out, float* widened, uint64_t n) {
  if (isa == CpuIsa::avx512_bf16) to_bf16_avx512(in, out, n);
  else
    for (uint64_t i = 0; i < n; ++i) out[i] = float_to_bf16(in[i]);
  if (widened)
    for (uint64_t i = 0; i < n; ++i) widened[i] = bf16_to_float(out[i]);
}

void run_gemm(CpuLayout layout, CpuIsa isa, const CpuProjection& p, uint64_t n, uint64_t k, const uint16_t* xb, const float* xf, uint64_t m, float* out) {
  cpu::packed_gemm(layout, isa, cpu::Gemm{p.weight, p.scale, n, k}, xb, xf, m, out);
}

}  // namespace

std::string_view cpu_layout_name(CpuLayout layout) {
  switch (layout) {
    case CpuLayout::mxfp4: return "mxfp4";
    case CpuLayout::bf16_amx: return "bf16_amx";
    case CpuLayout::bf16_vec: return "bf16_vec";
    case CpuLayout::fp8_block: return "fp8_block";
    case CpuLayout::int8_vnni4: return "int8_vnni4";
  }
  return "?";
}

std::string_view cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::avx512_bf16: return "avx512_bf16";
    case CpuIsa::avx2: return "avx2";
    case CpuIsa::scalar: return "scalar";
  }
  return "scalar";
}

bool cpu_supports(CpuIsa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case CpuIsa::avx512_bf16:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16") &&
             __builtin_cpu_supports("avx512vbmi");
    case CpuIsa::avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case CpuIsa::scalar: return true;
  }
  return false;
}

CpuIsa best_cpu_isa() {
  static const CpuIsa isa = [] {
    // The ordered list, best first, ending in the portable kernel; MOEPACK_CPU_ISA caps it.
    const char* forced = std::getenv("MOEPACK_CPU_ISA");
    for (CpuIsa isa : {CpuIsa::avx512_bf16, CpuIsa::avx2, CpuIsa::scalar}) {
      if (forced && cpu_isa_name(isa) != forced && isa != CpuIsa::scalar) continue;
      if (cpu_supports(isa)) return isa;
    }
    return CpuIsa::scalar;
  }();
  return isa;
}

bool cpu_layout_fits(CpuLayout, uint64_t n, uint64_t k) { return n > 0 && k > 0 && n % cpu::kBlockRows == 0 && k % 32 == 0; }

void cpu_packed_gemm(CpuLayout layout, CpuIsa isa, const CpuProjection& w, uint64_t n, uint64_t k, const uint16_t* x_bf16, uint64_t m, float* out) {
  if (!cpu_layout_fits(layout, n, k)) throw Error(ErrorKind::bad_input, "cpu_packed_gemm: " + std::to_string(n) + " x " + std::to_string(k) + " does not fit the layout");
  if (!cpu_supports(isa)) throw Error(ErrorKind::usage, "this CPU cannot run the " + std::string(cpu_isa_name(isa)) + " kernels");
  std::vector<float> xf;
  if (isa != CpuIsa::avx512_bf16) {
    xf.resize(static_cast<size_t>(m * k));
    for (size_t i = 0; i < xf.size(); ++i) xf[i] = bf16_to_float(x_bf16[i]);
  }
  run_gemm(layout, isa, w, n, k, x_bf16, xf.empty() ? nullptr : xf.data(), m, out);
  if (w.bias)
    for (uint64_t i = 0; i < m; ++i)
      for (uint64_t r = 0; r < n; ++r) out[i * n + r] += w.bias[r];
}

std::vector<float> cpu_experts_moe(CpuLayout layout, const std::vector<float>& x, uint64_t tokens, uint64_t hidden, const Routing& routing,
                                   const std::vector<const CpuExpert*>& experts, const MoeShape& s, const ActivationSpec& activation,
                                   const CpuExpertsOptions& options, CpuExpertsWorkspace* workspace) {
  const ResolvedActivation act = resolve_activation(activation);
  const uint64_t Hp = s.hidden, P = s.inter, n13 = s.gated ? 2 * P : P;
  if (!cpu_layout_fits(layout, n13, Hp) || !cpu_layout_fits(layout, Hp, P))
    throw Error(ErrorKind::bad_input, "the CPU " + std::string(cpu_layout_name(layout)) + " layout needs hidden and intermediate sizes that are multiples of 32 (got " +
                                          std::to_string(Hp) + ", " + std::to_string(P) + ")");
  if (hidden > Hp || x.size() != tokens * hidden || routing.tokens != tokens) throw_internal("cpu_experts_moe: sizes");
  if (!cpu_supports(options.isa)) throw Error(ErrorKind::usage, "this CPU cannot run the " + std::string(cpu_isa_name(options.isa)) + " kernels");
  const CpuIsa isa = options.isa;
  const bool floats = isa != CpuIsa::avx512_bf16;  // the AVX2 and portable kernels read floats

  CpuExpertsWorkspace local;
  CpuExpertsWorkspace& ws = workspace ? *workspace : local;
  // Tokens of each expert, in token order (the lists keep their capacity between calls).
  auto& per_expert = ws.tokens_of_expert;
  per_expert.resize(experts.size());
  for (auto& list : per_expert) list.clear();
  for (uint64_t t = 0; t < tokens; ++t)
    for (uint64_t j = 0; j < routing.top_k; ++j) {
      const uint32_t e = routing.ids[t * routing.top_k + j];
      if (e >= experts.size()) throw_internal("cpu_experts_moe: expert id out of range");
      per_expert[e].push_back({static_cast<uint32_t>(t), routing.weights[t * routing.top_k + j]});
    }
  uint64_t max_tokens = 0;
  for (const auto& v : per_expert) max_tokens = std::max<uint64_t>(max_tokens, v.size());

  // Sized for the busiest expert; a workspace kept by the caller only grows, so repeated
  // forward passes allocate nothing but their output. y holds x as floats (AVX2 and portable
  // kernels) until w2 overwrites it.
  auto& h = ws.h;
  auto& a = ws.act;
  auto& y = ws.y;
  auto& xb = ws.x_bf16;
  auto& ab = ws.act_bf16;
  h.resize(static_cast<size_t>(max_tokens * n13));
  a.resize(static_cast<size_t>(max_tokens * P));
  y.resize(static_cast<size_t>(max_tokens * Hp));
  xb.resize(static_cast<size_t>(max_tokens * Hp));
  ab.resize(static_cast<size_t>(max_tokens * P));
  std::vector<float> out(static_cast<size_t>(tokens * hidden), 0.0f);

  // Element-wise work is spread over tokens once there are enough of them to pay for waking
  // threads; each value is computed by one thread, so the bytes do not depend on the split.
  auto per_token = [](uint64_t m, auto&& fn) {
    if (m < 8) {
      for (uint64_t i = 0; i < m; ++i) fn(i);
      return;
    }
    tbb::parallel_for(tbb::blocked_range<uint64_t>(0, m, 4), [&](const tbb::blocked_range<uint64_t>& r) {
      for (uint64_t i = r.begin(); i < r.end(); ++i) fn(i);
    });
  };
  auto body = [&] {
    for (uint64_t e = 0; e < experts.size(); ++e) {
      const auto& list = per_expert[e];
      if (list.empty() || !experts[e]) continue;
      const CpuExpert& ex = *experts[e];
      const uint64_t m = list.size();
      // x rows of this expert's tokens, zero-padded to Hp, in BF16 (and widened back).
      per_token(m, [&](uint64_t i) {
        float* row = y.data() + i * Hp;  // y is free until w2 runs
        std::copy_n(x.data() + list[i].first * hidden, hidden, row);
        std::fill(row + hidden, row + Hp, 0.0f);
        to_bf16(isa, row, xb.data() + i * Hp, floats ? row : nullptr, Hp);
      });
      run_gemm(layout, isa, ex.w13, n13, Hp, xb.data(), floats ? y.data() : nullptr, m, h.data());
      per_token(m, [&](uint64_t i) {
        const float* hi = h.data() + i * n13;
        const float* b = ex.w13.bias;
        float* ai = a.data() + i * P;
        for (uint64_t j = 0; j < P; ++j) {
          auto [g, u] = s.gated ? gate_and_up(hi, j, P, s.rows) : std::pair<float, float>{hi[j], 0.0f};
          if (b) {
            const auto [bg, bu] = s.gated ? gate_and_up(b, j, P, s.rows) : std::pair<float, float>{b[j], 0.0f};
            g += bg;
            u += bu;
          }
          ai[j] = activation_value(act, g, u);
        }
        to_bf16(isa, ai, ab.data() + i * P, floats ? ai : nullptr, P);
      });
      run_gemm(layout, isa, ex.w2, Hp, P, ab.data(), floats ? a.data() : nullptr, m, y.data());
      const float* b2 = ex.w2.bias;
      per_token(m, [&](uint64_t i) {
        float* o = out.data() + list[i].first * hidden;
        const float w = list[i].second;
        const float* yi = y.data() + i * Hp;
        if (b2)
          for (uint64_t c = 0; c < hidden; ++c) o[c] += w * (yi[c] + b2[c]);
        else
          for (uint64_t c = 0; c < hidden; ++c) o[c] += w * yi[c];
      });
    }
  };
  if (options.threads > 0) tbb::task_arena(options.threads).execute(body);
  else body();
  return out;
}

}  // namespace moepack::experts
