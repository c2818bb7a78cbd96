// The fast CPU experts' layer driver (cpu_experts.h): the instruction-set list, routing tokens to
// experts, BF16 activations, the activation function, workspace and threads. The GEMMs are the
// shared kernels of cpu_gemm.h over each layout's tile policy (cpu_tiles.cpp).
#include "lib/experts/cpu_experts.h"

#include "lib/experts/cpu_gemm.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include "lib/core/codecs.h"
#include "lib/core/cpus.h"
#include "lib/core/error.h"

namespace moepack::experts {
namespace {

MOEPACK_AVX512_BF16 void to_bf16_avx512(const float* in, uint16_t* out, uint64_t n) {
  uint64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(in + i)));
  for (; i < n; ++i) out[i] = float_to_bf16(in[i]);
}

// Whether the level's kernels read the activations as BF16 only (AVX2 and portable read floats).
bool reads_bf16(CpuIsa isa) { return isa == CpuIsa::amx_bf16 || isa == CpuIsa::avx512_bf16; }

// `in` rounded to BF16 into `out`; with `widened`, the rounded values back as floats too (the
// AVX2 and portable kernels read floats).
void to_bf16(CpuIsa isa, const float* in, uint16_t* out, float* widened, uint64_t n) {
  if (reads_bf16(isa)) to_bf16_avx512(in, out, n);
  else
    for (uint64_t i = 0; i < n; ++i) out[i] = float_to_bf16(in[i]);
  if (widened)
    for (uint64_t i = 0; i < n; ++i) widened[i] = bf16_to_float(out[i]);
}

}  // namespace

std::string_view cpu_layout_name(CpuLayout layout) {
  switch (layout) {
    case CpuLayout::mxfp4: return "mxfp4";
    case CpuLayout::bf16_amx: return "bf16_amx";
    case CpuLayout::bf16_vec: return "bf16_vec";
    case CpuLayout::fp8_block: return "fp8_block";
    case CpuLayout::int8_vnni4: return "int8_vnni4";
    case CpuLayout::int4_vnni4: return "int4_vnni4";
  }
  return "?";
}

std::string_view cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::amx_bf16: return "amx_bf16";
    case CpuIsa::avx512_bf16: return "avx512_bf16";
    case CpuIsa::avx512f: return "avx512f";
    case CpuIsa::avx2: return "avx2";
    case CpuIsa::scalar: return "scalar";
  }
  return "scalar";
}

namespace {

// AVX-512F with BW and VL (the FP32 level), or why not.
std::string avx512f_missing() {
  __builtin_cpu_init();
  const std::pair<bool, const char*> features[] = {{__builtin_cpu_supports("avx512f"), "AVX-512F"},
                                                   {__builtin_cpu_supports("avx512bw"), "AVX-512BW"},
                                                   {__builtin_cpu_supports("avx512vl"), "AVX-512VL"},
                                                   {__builtin_cpu_supports("fma"), "FMA"}};
  for (const auto& [has, name] : features)
    if (!has) return std::string("the CPU has no ") + name;
  return {};
}

std::string avx512_missing() {
  __builtin_cpu_init();
  // __builtin_cpu_supports takes literals only.
  const std::pair<bool, const char*> features[] = {{__builtin_cpu_supports("avx512f"), "AVX-512F"},   {__builtin_cpu_supports("avx512bw"), "AVX-512BW"},
                                                   {__builtin_cpu_supports("avx512vl"), "AVX-512VL"}, {__builtin_cpu_supports("avx512bf16"), "AVX-512 BF16"},
                                                   {__builtin_cpu_supports("avx512vbmi"), "AVX-512 VBMI"}};
  for (const auto& [has, name] : features)
    if (!has) return std::string("the CPU has no ") + name;
  return {};
}

// The AMX level's own conditions, checked once per process (the permission is the process's).
std::string amx_missing() {
  static const std::string why = []() -> std::string {
#ifdef MOEPACK_AMX_EMULATE
    return {};  // the tile instructions are emulated (lib/experts/cpu_gemm.h)
#endif
    // CPUID leaf 7, subleaf 0, EDX: bit 22 AMX-BF16, bit 24 AMX-TILE.
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24))) return "the CPU has no AMX-TILE (CPUID.(EAX=7,ECX=0):EDX[24])";
    if (!(d & (1u << 22))) return "the CPU has no AMX-BF16 (CPUID.(EAX=7,ECX=0):EDX[22])";
    // The OS must enable the tile configuration and data state (XCR0 bits 17 and 18), which
    // XGETBV reads where OSXSAVE (CPUID.1:ECX[27]) says it may run.
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return "the OS does not enable XSAVE (CPUID.1:ECX[27])";
    uint32_t xcr0_lo = 0, xcr0_hi = 0;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    if ((xcr0_lo & (3u << 17)) != (3u << 17)) return "the OS does not enable the AMX tile state (XCR0 bits 17 and 18)";
    // Linux (5.16 and later) hands the tile data state to a process that asks for it:
    // arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), then ARCH_GET_XCOMP_PERM shows it.
    constexpr long kReqXcompPerm = 0x1023, kGetXcompPerm = 0x1022, kXtileData = 18;
    if (syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) != 0)
      return std::string("Linux refused the AMX tile data (arch_prctl ARCH_REQ_XCOMP_PERM: ") + std::strerror(errno) + ")";
    uint64_t granted = 0;
    if (syscall(SYS_arch_prctl, kGetXcompPerm, &granted) != 0 || !(granted & (uint64_t{1} << kXtileData)))
      return "Linux did not grant the AMX tile data (arch_prctl ARCH_GET_XCOMP_PERM)";
    return {};
  }();
  return why;
}

}  // namespace

std::string cpu_isa_unavailable(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::amx_bf16: {
      // The level runs the AVX-512 kernels for few tokens and decodes with them.
      const std::string why = avx512_missing();
      return why.empty() ? amx_missing() : why;
    }
    case CpuIsa::avx512_bf16: return avx512_missing();
    case CpuIsa::avx512f: return avx512f_missing();
    case CpuIsa::avx2:
      __builtin_cpu_init();
      if (!__builtin_cpu_supports("avx2")) return "the CPU has no AVX2";
      if (!__builtin_cpu_supports("fma")) return "the CPU has no FMA";
      return {};
    case CpuIsa::scalar: return {};
  }
  return "unknown instruction set";
}

bool cpu_supports(CpuIsa isa) {
  // Asked on every packed GEMM: the answers are the process's, worked out once.
  static const auto supported = [] {
    std::array<bool, std::size(kCpuIsas)> yes{};
    for (CpuIsa level : kCpuIsas) yes[static_cast<size_t>(level)] = cpu_isa_unavailable(level).empty();
    return yes;
  }();
  const auto i = static_cast<size_t>(isa);
  return i < supported.size() && supported[i];
}

CpuIsa best_cpu_isa() {
  static const CpuIsa isa = [] {
    // The ordered list, best first, ending in the portable kernel; MOEPACK_CPU_ISA starts it
    // at the level it names.
    const char* forced = std::getenv("MOEPACK_CPU_ISA");
    bool started = !forced || !*forced;
    for (CpuIsa level : kCpuIsas) {
      started = started || cpu_isa_name(level) == forced;
      if (started && cpu_supports(level)) return level;
    }
    if (!started) {
      std::string names;
      for (CpuIsa level : kCpuIsas) names += (names.empty() ? "" : ", ") + std::string(cpu_isa_name(level));
      throw Error(ErrorKind::usage, "MOEPACK_CPU_ISA=" + std::string(forced) + " is not one of the CPU kernels' instruction sets (" + names + ")");
    }
    return CpuIsa::scalar;
  }();
  return isa;
}

namespace {

// VNNI at the level's width: AVX-VNNI (VEX vpdpwssd on ymm) for the AVX2 kernels, AVX512_VNNI
// for the 512-bit ones (the BF16 levels' int16 decodes are the AVX-512F kernels).
// Read from CPUID, as clang 14's __builtin_cpu_supports does not know AVX-VNNI: leaf 7 subleaf 1
// EAX[4] (AVX-VNNI), leaf 7 subleaf 0 ECX[11] (AVX512_VNNI). The OS state for the registers is
// the level's own condition (cpu_isa_unavailable). Read once: every packed GEMM with a choice
// asks, and CPUID is slow (under a hypervisor, an exit to it).
bool has_vnni(CpuIsa isa) {
  static const auto vnni = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    const bool avx = __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4));
    const bool avx512 = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 11));
    return std::pair<bool, bool>{avx, avx512};
  }();
  if (isa == CpuIsa::scalar) return false;
  return isa == CpuIsa::avx2 ? vnni.first : vnni.second;
}

// MOEPACK_CPU_<name>=0|1, or `otherwise` when unset or empty.
bool switch_from_environment(const char* name, bool otherwise) {
  const std::string variable = std::string("MOEPACK_CPU_") + name;
  const char* value = std::getenv(variable.c_str());
  if (!value || !*value) return otherwise;
  if (std::string_view(value) == "0") return false;
  if (std::string_view(value) == "1") return true;
  throw Error(ErrorKind::usage, variable + "=" + value + " is neither 0 nor 1");
}

// This CPU's choice at the level with the environment's overrides (not yet checked against the CPU).
CpuKernelChoice asked_kernel_choice(CpuIsa isa) {
  __builtin_cpu_init();
  CpuKernelChoice choice;
  choice.vnni = switch_from_environment("VNNI", has_vnni(isa));
  choice.avx512f_for_bf16 = switch_from_environment("AVX512F_FOR_BF16", reads_bf16(isa) && __builtin_cpu_is("intel"));
  return choice;
}

}  // namespace

CpuKernelChoice cpu_kernel_choice(CpuIsa isa) {
  // Asked by every layer call: the process's answers, worked out once per level.
  static const auto asked = [] {
    std::array<CpuKernelChoice, std::size(kCpuIsas)> each{};
    for (CpuIsa level : kCpuIsas) each[static_cast<size_t>(level)] = asked_kernel_choice(level);
    return each;
  }();
  const CpuKernelChoice choice = asked.at(static_cast<size_t>(isa));
  if (const std::string why = cpu_kernel_choice_unavailable(isa, choice); !why.empty()) throw Error(ErrorKind::usage, why);
  return choice;
}

std::string cpu_kernel_choice_unavailable(CpuIsa isa, const CpuKernelChoice& choice) {
  if (choice.vnni && (isa == CpuIsa::scalar || !has_vnni(isa)))
    return "the " + std::string(cpu_isa_name(isa)) + " kernels cannot use VNNI here: " +
           (isa == CpuIsa::scalar ? "the portable kernels have none" : isa == CpuIsa::avx2 ? "the CPU has no AVX-VNNI" : "the CPU has no AVX512_VNNI");
  return {};
}

std::vector<std::string> cpu_kernel_choice_names(CpuIsa isa, const CpuKernelChoice& choice) {
  std::vector<std::string> names;
  const bool stands_in = cpu::avx512f_stands_in(isa, choice);
  if (choice.vnni && (isa == CpuIsa::avx2 || isa == CpuIsa::avx512f || stands_in)) names.push_back("vnni");
  if (stands_in) names.push_back("avx512f_for_bf16");
  return names;
}

bool cpu_layout_fits(CpuLayout, uint64_t n, uint64_t k) { return n > 0 && k > 0 && n % cpu::kBlockRows == 0 && k % 32 == 0; }

std::string cpu_int4_groups_unfit(uint64_t k, uint64_t groups) {
  if (groups == 0 || k % groups != 0) return std::to_string(groups) + " scale groups do not divide " + std::to_string(k) + " inputs";
  const uint64_t group = k / groups, block_k = std::min<uint64_t>(group, 128);
  if (block_k != 16 && block_k != 32 && block_k != 64 && block_k != 128) return "block_k = min(group size " + std::to_string(group) + ", 128) is not 16, 32, 64 or 128";
  if (group % block_k != 0) return "group size " + std::to_string(group) + " is no multiple of block_k " + std::to_string(block_k);
  return {};
}

namespace {

// Throws Error(bad_input) for a projection the layout's kernels cannot read at n x k.
// `what` names the projection in the message (called only on failure: the layer checks every
// expert at each call).
template <class What>
void check_projection(CpuLayout layout, const CpuProjection& p, uint64_t n, uint64_t k, What&& what) {
  if (!cpu_layout_fits(layout, n, k))
    throw Error(ErrorKind::bad_input, what() + ": " + std::to_string(n) + " x " + std::to_string(k) + " does not fit the CPU " + std::string(cpu_layout_name(layout)) + " layout (multiples of 32)");
  if (layout != CpuLayout::int4_vnni4) return;
  if (const std::string why = cpu_int4_groups_unfit(k, p.groups); !why.empty()) throw Error(ErrorKind::bad_input, what() + ": " + why);
  if (!p.zeros) throw Error(ErrorKind::bad_input, what() + ": the int4_vnni4 kernels need the zero points");
}

// The kernel choice to run at the level (the CPU's own when not given, which cpu_kernel_choice
// checks), or Error(usage) where this CPU cannot run the level or a given choice.
CpuKernelChoice checked_choice(CpuIsa isa, const std::optional<CpuKernelChoice>& given) {
  if (!cpu_supports(isa)) throw Error(ErrorKind::usage, "this CPU cannot run the " + std::string(cpu_isa_name(isa)) + " kernels: " + cpu_isa_unavailable(isa));
  if (!given) return cpu_kernel_choice(isa);
  if (const std::string why = cpu_kernel_choice_unavailable(isa, *given); !why.empty()) throw Error(ErrorKind::usage, why);
  return *given;
}

}  // namespace

void cpu_packed_gemm(CpuLayout layout, CpuIsa isa, const CpuProjection& w, uint64_t n, uint64_t k, const uint16_t* x_bf16, uint64_t m, float* out,
                     std::optional<CpuKernelChoice> kernels) {
  check_projection(layout, w, n, k, [] { return std::string("cpu_packed_gemm"); });
  const CpuKernelChoice choice = checked_choice(isa, kernels);
  std::vector<float> xf;
  if (cpu::reads_floats(isa, choice)) {
    xf.resize(static_cast<size_t>(m * k));
    for (size_t i = 0; i < xf.size(); ++i) xf[i] = bf16_to_float(x_bf16[i]);
  }
  std::vector<int16_t> q;
  std::vector<float> unit;
  std::vector<uint8_t> ok;
  if (const cpu::Int16Order order = cpu::int16_rows_order(layout, isa, choice); order != cpu::Int16Order::none && m <= cpu::int16_max_tokens(isa, choice)) {
    q.resize(static_cast<size_t>(m * k));
    unit.resize(static_cast<size_t>(m * (k / cpu::kInt16Block)));
    ok.resize(static_cast<size_t>(m));
    for (uint64_t i = 0; i < m; ++i) ok[i] = cpu::quantize_int16_row(xf.data() + i * k, k, order, q.data() + i * k, unit.data() + i * (k / cpu::kInt16Block));
  }
  const cpu::Int16Rows xq{q.data(), unit.data(), ok.data()};
  const cpu::Gemm g{w.weight, w.scale, n, k, w.zeros, w.groups};
  tbb::parallel_for(tbb::blocked_range<uint64_t>(0, n / cpu::kBlockRows), [&](const tbb::blocked_range<uint64_t>& r) {
    cpu::packed_gemm_blocks(layout, isa, choice, g, r.begin(), r.end(), x_bf16, xf.empty() ? nullptr : xf.data(), ok.empty() ? nullptr : &xq, m, out);
  });
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
  for (size_t e = 0; e < experts.size(); ++e)
    if (experts[e]) {
      check_projection(layout, experts[e]->w13, n13, Hp, [&] { return "expert " + std::to_string(e) + " w13"; });
      check_projection(layout, experts[e]->w2, Hp, P, [&] { return "expert " + std::to_string(e) + " w2"; });
    }
  const CpuIsa isa = options.isa;
  const CpuKernelChoice choice = checked_choice(isa, options.kernels);
  const bool floats = cpu::reads_floats(isa, choice);  // the AVX2, AVX-512F and portable kernels read floats
  const cpu::Int16Order int16_order = cpu::int16_rows_order(layout, isa, choice);  // and their few-token decodes, of some layouts, int16 rows
  const bool int16 = int16_order != cpu::Int16Order::none;

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
      if (experts[e]) per_expert[e].push_back({static_cast<uint32_t>(t), routing.weights[t * routing.top_k + j]});
    }
  // The experts this rank runs, their token rows stacked in expert order: expert held[i] owns
  // rows [first[i], first[i + 1]) of every buffer below.
  auto& held = ws.held;
  auto& first = ws.first_row;
  auto& row_token = ws.row_token;
  auto& row_weight = ws.row_weight;
  held.clear();
  first.assign(1, 0);
  row_token.clear();
  row_weight.clear();
  for (uint64_t e = 0; e < experts.size(); ++e) {
    if (per_expert[e].empty()) continue;
    held.push_back(static_cast<uint32_t>(e));
    for (const auto& [t, w] : per_expert[e]) {
      row_token.push_back(t);
      row_weight.push_back(w);
    }
    first.push_back(row_token.size());
  }
  const uint64_t R = row_token.size();
  // Each token's rows in expert order (a counting sort), so the output adds its experts in one
  // fixed order whichever thread sums it.
  auto& token_first = ws.token_first;
  auto& token_rows = ws.token_rows;
  token_first.assign(static_cast<size_t>(tokens + 1), 0);
  for (uint32_t t : row_token) ++token_first[t + 1];
  for (uint64_t t = 0; t < tokens; ++t) token_first[t + 1] += token_first[t];
  token_rows.resize(static_cast<size_t>(R));
  {
    auto& fill = ws.token_fill;
    fill.assign(token_first.begin(), token_first.end() - 1);
    for (uint64_t r = 0; r < R; ++r) token_rows[fill[row_token[r]]++] = static_cast<uint32_t>(r);
  }

  // Sized for this batch's rows; a workspace kept by the caller only grows, so repeated forward
  // passes allocate nothing but their output. y holds x as floats (AVX2 and portable kernels)
  // until w2 overwrites it.
  auto& h = ws.h;
  auto& a = ws.act;
  auto& y = ws.y;
  auto& xb = ws.x_bf16;
  auto& ab = ws.act_bf16;
  h.resize(static_cast<size_t>(R * n13));
  a.resize(static_cast<size_t>(R * P));
  y.resize(static_cast<size_t>(R * Hp));
  xb.resize(static_cast<size_t>(R * Hp));
  ab.resize(static_cast<size_t>(R * P));
  if (int16) {
    ws.x_q.resize(static_cast<size_t>(R * Hp));
    ws.x_unit.resize(static_cast<size_t>(R * (Hp / cpu::kInt16Block)));
    ws.x_ok.resize(static_cast<size_t>(R));
    ws.act_q.resize(static_cast<size_t>(R * P));
    ws.act_unit.resize(static_cast<size_t>(R * (P / cpu::kInt16Block)));
    ws.act_ok.resize(static_cast<size_t>(R));
  }
  const cpu::Int16Rows x_rows{ws.x_q.data(), ws.x_unit.data(), ws.x_ok.data()}, act_rows{ws.act_q.data(), ws.act_unit.data(), ws.act_ok.data()};
  std::vector<float> out(static_cast<size_t>(tokens * hidden), 0.0f);

  // Element-wise work is spread over rows once there are enough of them to pay for waking
  // threads; each value is computed by one thread, so the bytes do not depend on the split.
  auto per_row = [](uint64_t n, auto&& fn) {
    if (n < 8) {
      for (uint64_t i = 0; i < n; ++i) fn(i);
      return;
    }
    tbb::parallel_for(tbb::blocked_range<uint64_t>(0, n, 4), [&](const tbb::blocked_range<uint64_t>& r) {
      for (uint64_t i = r.begin(); i < r.end(); ++i) fn(i);
    });
  };
  // One GEMM stage for every held expert at once: the (expert, row block) pairs are the units of
  // parallel work, so a decode step wakes the threads twice, not twice per expert.
  auto stage = [&](uint64_t n, uint64_t k, bool w13, const uint16_t* in_b, const float* in_f, const cpu::Int16Rows* in_q, float* out_rows) {
    const uint64_t blocks = n / cpu::kBlockRows;
    tbb::parallel_for(tbb::blocked_range<uint64_t>(0, held.size() * blocks), [&](const tbb::blocked_range<uint64_t>& r) {
      for (uint64_t task = r.begin(); task < r.end();) {
        const uint64_t i = task / blocks, nb0 = task % blocks, nb1 = std::min(blocks, nb0 + (r.end() - task));
        const CpuProjection& p = w13 ? experts[held[i]]->w13 : experts[held[i]]->w2;
        const uint64_t row = first[i], m = first[i + 1] - row;
        const cpu::Int16Rows rows_q = in_q ? in_q->from_row(row, k) : cpu::Int16Rows{};
        cpu::packed_gemm_blocks(layout, isa, choice, cpu::Gemm{p.weight, p.scale, n, k, p.zeros, p.groups}, nb0, nb1, in_b + row * k, in_f ? in_f + row * k : nullptr,
                                in_q ? &rows_q : nullptr, m, out_rows + row * n);
        task += nb1 - nb0;
      }
    });
  };
  // The index in `held` of each row's expert; the expert itself, for its biases.
  auto held_index_of_row = [&](uint64_t r) { return static_cast<size_t>(std::upper_bound(first.begin(), first.end(), r) - first.begin() - 1); };
  auto expert_of_row = [&](uint64_t r) { return experts[held[held_index_of_row(r)]]; };
  // Only the rows of experts with few enough tokens for the int16 decodes are quantized (the
  // others run the FP32 panels).
  auto int16_row = [&](uint64_t r) {
    const size_t i = held_index_of_row(r);
    return first[i + 1] - first[i] <= cpu::int16_max_tokens(isa, choice);
  };

  auto body = [&] {
    // x rows of every (token, expert) pair, zero-padded to Hp, in BF16 (and widened back).
    per_row(R, [&](uint64_t r) {
      float* row = y.data() + r * Hp;
      std::copy_n(x.data() + row_token[r] * hidden, hidden, row);
      std::fill(row + hidden, row + Hp, 0.0f);
      to_bf16(isa, row, xb.data() + r * Hp, floats ? row : nullptr, Hp);
      if (int16) ws.x_ok[r] = int16_row(r) && cpu::quantize_int16_row(row, Hp, int16_order, ws.x_q.data() + r * Hp, ws.x_unit.data() + r * (Hp / cpu::kInt16Block));
    });
    stage(n13, Hp, true, xb.data(), floats ? y.data() : nullptr, int16 ? &x_rows : nullptr, h.data());
    // The activation of columns [j0, j1) of row r.
    auto activate = [&](uint64_t r, uint64_t j0, uint64_t j1) {
      const float* hr = h.data() + r * n13;
      const float* b = expert_of_row(r)->w13.bias;
      float* ar = a.data() + r * P;
      for (uint64_t j = j0; j < j1; ++j) {
        auto [g, u] = s.gated ? gate_and_up(hr, j, P, s.rows) : std::pair<float, float>{hr[j], 0.0f};
        if (b) {
          const auto [bg, bu] = s.gated ? gate_and_up(b, j, P, s.rows) : std::pair<float, float>{b[j], 0.0f};
          g += bg;
          u += bu;
        }
        ar[j] = activation_value(act, g, u);
      }
    };
    // A decode step's few rows are split into column chunks as well: one thread working through
    // the rows' thousands of exponentials alone left the others idle for about a tenth of a
    // gpt-oss-20b forward at one token (Zen 5, 2 threads).
    constexpr uint64_t kActivationChunk = 256;
    const bool by_chunks = R < 8;
    if (by_chunks) {
      const uint64_t chunks = (P + kActivationChunk - 1) / kActivationChunk;
      tbb::parallel_for(tbb::blocked_range<uint64_t>(0, R * chunks), [&](const tbb::blocked_range<uint64_t>& range) {
        for (uint64_t i = range.begin(); i < range.end(); ++i) activate(i / chunks, (i % chunks) * kActivationChunk, std::min(P, (i % chunks + 1) * kActivationChunk));
      });
    }
    per_row(R, [&](uint64_t r) {
      if (!by_chunks) activate(r, 0, P);
      float* ar = a.data() + r * P;
      to_bf16(isa, ar, ab.data() + r * P, floats ? ar : nullptr, P);
      if (int16) ws.act_ok[r] = int16_row(r) && cpu::quantize_int16_row(ar, P, int16_order, ws.act_q.data() + r * P, ws.act_unit.data() + r * (P / cpu::kInt16Block));
    });
    stage(Hp, P, false, ab.data(), floats ? a.data() : nullptr, int16 ? &act_rows : nullptr, y.data());
    // Each token adds its experts' outputs, weighted, in expert order.
    per_row(tokens, [&](uint64_t t) {
      float* o = out.data() + t * hidden;
      for (uint32_t k = token_first[t]; k < token_first[t + 1]; ++k) {
        const uint64_t r = token_rows[k];
        const float* yr = y.data() + r * Hp;
        const float* b2 = expert_of_row(r)->w2.bias;
        const float w = row_weight[r];
        if (b2)
          for (uint64_t c = 0; c < hidden; ++c) o[c] += w * (yr[c] + b2[c]);
        else
          for (uint64_t c = 0; c < hidden; ++c) o[c] += w * yr[c];
      }
    });
  };
  // In the caller's arena when it has the threads asked for (bench runs every forward in one),
  // else in an arena of them.
  const int threads = thread_count(options.threads);
  if (tbb::this_task_arena::max_concurrency() == threads) body();
  else tbb::task_arena(threads).execute(body);
  return out;
}

}  // namespace moepack::experts
