// Fast CPU experts for the x86 CPU artifacts (`cpu-amx`; `cpu-avx512` for BF16): they read the
// packed CPU weight layouts in place, never unpacking them, and compute a MoE layer with the
// same routing and activation as the reference (lib/experts/moe.h).
//
// Every layout they read is a VNNI operand of `vdpbf16ps` once its bytes are decoded to BF16:
// for each block of 32 output rows and each step of 2 (or 4) input columns, the layout holds the
// 32 rows' values side by side, so one decoded register times the broadcast activations adds
// the step's products to 16 row accumulators. A layout is therefore only "how to load one step
// of a 32-row block as BF16" plus "which scale multiplies which partial sums"
// (lib/experts/cpu_tiles.cpp); the GEMM kernels (lib/experts/cpu_gemm.h) and the layer driver
// (routing, activation, workspace, threads) are shared.
//
//   layout        packer (packers/)                       step  decode to BF16              scale
//   mxfp4         CpuSglWeightPackedMxfp4Layout            2     E2M1 nibble table (vpermw)   E8M0 per row and 32 columns
//   bf16_amx      CpuPrepackMoeWeightLayout(amx)           2     none (already BF16 pairs)   none
//   bf16_vec      CpuPrepackMoeWeightLayout(vec), BF16     2     pair two columns (vpermw)   none
//   fp8_block     CpuSglWeightPackedFp8Layout              2     E4M3 -> BF16, exact         fp32 per 128 x 128 block
//   int8_vnni4    CpuSglVnni4Int8Layout (+ s8s8 sums)      4     int8 -> BF16, exact         fp32 per row
//   int4_vnni4    CpuSglInt4WeightLayout (+ int4 sums)     4     code - zero point (vpermw)  fp32 per row and group
//
// Weights are exact in BF16 in every layout (E2M1, E4M3 with its subnormals, int8, a 4-bit code
// less its zero point, and BF16 all are), activations are rounded to BF16 before each GEMM (as vLLM's CPU kernels take them), and
// products accumulate in FP32; a scale multiplies the partial sums of the columns it covers.
// Against the double-precision reference the relative error is a few 1e-3 (moepack-verify(1)
// documents the tolerance). vLLM's own kernels differ in two ways the tolerance covers: its FP8
// kernel folds the block scale into the weights rounded to BF16, and its INT8 W8A8 and INT4
// W4A16 kernels quantize activations per token to int8 and uint8 (these kernels keep BF16 activations instead, the
// same precision as every other layout, so one tolerance serves them all). The one exception is
// the few-token decode of MXFP4, INT4 and INT8 on the AVX2 and AVX-512F levels (up to 8 and 4
// tokens per expert, and on Intel the BF16 levels' up to 4: CpuKernelChoice): it reads the BF16
// activations as 16-bit integers per block of 32 columns (lib/experts/cpu_gemm.h, Int16Rows),
// exact within 2^6 of each block's largest value and within 2^-14 of it below, because integer
// products summed exactly cost half the instructions of FP32 weights there.
//
// Instruction sets, best first: AMX (Sapphire Rapids and later: the same decoded BF16 VNNI-2
// steps, 16 of them at a time, as the B operand of `tdpbf16ps` tiles; the BF16 AMX prepack is
// read by the tiles as it lies), AVX-512 BF16 (`vdpbf16ps`, with VBMI's byte permutes for the
// FP8 decode: Sapphire Rapids and later, Zen 4 and later), AVX-512F with BW and VL but no BF16
// (Skylake-SP to Ice Lake: the AVX2 decoders' FP32 panels read by 16-lane FMA tiles, MXFP4
// decoded on 16 lanes), AVX2 + FMA (weights decoded to FP32), and portable C++ elsewhere; best_cpu_isa() picks the first this machine runs. The AMX level
// needs the CPU's AMX-TILE and AMX-BF16 (CPUID), the tile state enabled by the OS (XCR0) and
// Linux's permission to use it (arch_prctl ARCH_REQ_XCOMP_PERM); without any of them the list
// goes on with AVX-512. Tiles pay off from 5 tokens per expert (sgl-kernel's threshold for its
// AMX brgemm, `can_use_brgemm`: M > 4); fewer tokens run the AVX-512 kernels at that level too.
// Within a level, CpuKernelChoice says what the instruction set does not: VNNI for the int16
// products, and whether the AVX-512F kernels stand in for vdpbf16ps (Intel).
// Each output value is summed by one thread in one fixed order (set by the token count, never
// by the thread count), so the bytes do not depend on the thread count.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lib/experts/moe.h"
#include "lib/experts/routing.h"

namespace moepack::experts {

// The packed CPU weight layouts the fast experts read (table above).
enum class CpuLayout { mxfp4, bf16_amx, bf16_vec, fp8_block, int8_vnni4, int4_vnni4 };
std::string_view cpu_layout_name(CpuLayout layout);

// The FP8 block the fp8_block layout's scales cover (vLLM's CPU FP8 MoE runs 128 x 128 only).
inline constexpr uint64_t kCpuFp8Block = 128;

// One projection (w13 or w2) of one expert, as the artifact holds it (not copied).
//   mxfp4       weight [n, k/2] bytes; scale [n/32][k/32][32] E8M0 bytes
//   bf16_amx    weight [n/16][k/2][16][2] BF16; no scale
//   bf16_vec    weight [n/16][k][16] BF16; no scale
//   fp8_block   weight [n/32][k/2][32][2] E4M3 bytes; scale float [ceil(n/128), ceil(k/128)]
//   int8_vnni4  weight [n/32] blocks of [k/4][32][4] int8 then 32 int32 sums; scale float [n]
//   int4_vnni4  weight [n/32][k/B] blocks of B*16 bytes of codes then 32 int32 sums, B = block_k =
//               min(k / groups, 128); scale float and zeros int8 [n/32][groups][32]
struct CpuProjection {
  const uint8_t* weight = nullptr;
  const void* scale = nullptr;
  const float* bias = nullptr;     // [n] or null
  const int8_t* zeros = nullptr;   // int4_vnni4: the zero point each code is less (0..16)
  uint64_t groups = 0;             // int4_vnni4: scale groups along k
};

struct CpuExpert {
  CpuProjection w13, w2;
};

// The instruction sets a kernel can use, best first; the list ends with the portable one.
enum class CpuIsa { amx_bf16, avx512_bf16, avx512f, avx2, scalar };
inline constexpr CpuIsa kCpuIsas[] = {CpuIsa::amx_bf16, CpuIsa::avx512_bf16, CpuIsa::avx512f, CpuIsa::avx2, CpuIsa::scalar};
std::string_view cpu_isa_name(CpuIsa isa);
bool cpu_supports(CpuIsa isa);
// Why this machine cannot run the level (the missing CPU feature, or what the OS refused), or
// empty when it can.
std::string cpu_isa_unavailable(CpuIsa isa);
// The best kernel this machine runs, from the ordered list amx_bf16, avx512_bf16, avx512f, avx2, scalar
// (CPU features probed once). MOEPACK_CPU_ISA=NAME starts the list at that level (tests and
// benchmarks compare them); a name not in the list throws Error(usage).
CpuIsa best_cpu_isa();

// Choices within a level that its instruction set does not settle: cpu_kernel_choice() probes
// this CPU's, and tests and benchmarks set them to compare.
struct CpuKernelChoice {
  // The int16 decodes (cpu_gemm.h, Int16Rows) add their word products with vpdpwssd (AVX-512
  // VNNI in the 512-bit kernels, AVX-VNNI in the AVX2 ones) instead of pmaddwd and an add: the
  // same int32 sums, so the same bytes, in 7 instructions a step instead of 9 (MXFP4, AVX-512F).
  bool vnni = false;
  // At amx_bf16 and avx512_bf16: up to kAvx512fInt16MaxTokens tokens per expert run the AVX-512F
  // int16 decodes (MXFP4, INT4, INT8), and at avx512_bf16 prefill (5 tokens and more) runs the
  // AVX-512F FP32 panels, instead of vdpbf16ps: Intel's cores (Sapphire Rapids and later) are
  // slower at vdpbf16ps than at FP32 FMA (oneDNN's own bf16 matmul there runs below its f32),
  // AMD's (Zen 4 and later) are not. Those blocks give the avx512f level's bytes. Measured on a
  // Sapphire Rapids-class Xeon, 2 CPUs, one token: gpt-oss-20b MXFP4 at amx_bf16 3.6-3.7 ->
  // 2.7 ms, Qwen3-30B INT4 1.2-1.9 -> 1.1 ms; 512 tokens at avx512_bf16 against oneDNN: MXFP4
  // 0.59x -> 1.01x, FP8 0.70x -> 1.09x, BF16 0.71x -> 0.94x. On Zen 5 the same choice halves
  // prefill (MXFP4 179 -> 340 ms), hence by vendor.
  bool avx512f_for_bf16 = false;
};
inline bool operator==(const CpuKernelChoice& a, const CpuKernelChoice& b) { return a.vnni == b.vnni && a.avx512f_for_bf16 == b.avx512f_for_bf16; }
// What this CPU runs best at the level: vnni where it has the instruction (AVX512_VNNI at the
// AVX-512 levels, AVX-VNNI at avx2), avx512f_for_bf16 on Intel at the BF16 levels.
// MOEPACK_CPU_VNNI=0|1 and MOEPACK_CPU_AVX512F_FOR_BF16=0|1 override them (benchmarks compare);
// asking for VNNI on a CPU without it throws Error(usage).
CpuKernelChoice cpu_kernel_choice(CpuIsa isa);
// Why this CPU cannot run the choice at the level (VNNI it lacks), or empty when it can.
std::string cpu_kernel_choice_unavailable(CpuIsa isa, const CpuKernelChoice& choice);
// The choices that take effect at the level, by their names ("vnni", "avx512f_for_bf16"), for
// reports: VNNI where int16 decodes run (avx2, avx512f, and a BF16 level where AVX-512F stands in).
std::vector<std::string> cpu_kernel_choice_names(CpuIsa isa, const CpuKernelChoice& choice);

struct CpuExpertsOptions {
  int threads = 0;  // 0: the CPUs this process may use (affinity mask and cgroup quota, lib/core/cpus.h)
  CpuIsa isa = best_cpu_isa();
  std::optional<CpuKernelChoice> kernels;  // empty: cpu_kernel_choice(isa)
};

// Buffers a caller keeps across forward passes so they allocate nothing but their output.
struct CpuExpertsWorkspace {
  std::vector<std::vector<std::pair<uint32_t, float>>> tokens_of_expert;  // (token, routing weight)
  // The (token, expert) rows of a batch, stacked in expert order.
  std::vector<uint32_t> held;                      // experts with rows, ascending
  std::vector<uint64_t> first_row;                 // held[i]'s rows: [first_row[i], first_row[i + 1])
  std::vector<uint32_t> row_token;
  std::vector<float> row_weight;
  std::vector<uint32_t> token_first, token_rows, token_fill;  // each token's rows, in expert order
  std::vector<float> h, act, y;
  std::vector<uint16_t> x_bf16, act_bf16;
  // The same rows as 16-bit integers per block of 32 columns, where the level's one-token decode
  // of the layout reads them (cpu_gemm.h, Int16Rows): values, units, and whether each row has them.
  std::vector<int16_t> x_q, act_q;
  std::vector<float> x_unit, act_unit;
  std::vector<uint8_t> x_ok, act_ok;
};

// Whether the layout can hold a projection of n rows and k columns (both multiples of 32 for
// every layout: 32-row blocks, and 16-word VNNI groups along k).
bool cpu_layout_fits(CpuLayout layout, uint64_t n, uint64_t k);
// Why the int4_vnni4 kernels cannot read k columns in `groups` scale groups, or empty: groups
// must divide k, block_k = min(group, 128) must be 16, 32, 64 or 128 and divide the group (the
// layouts convert writes: lib/convert/cpu_int4.cpp).
std::string cpu_int4_groups_unfit(uint64_t k, uint64_t groups);

// The layer's output [T, H] for hidden states [T, H] (H <= Hp; zero-padded to Hp inside).
// `experts[e]` is null when this rank does not hold expert e. Deterministic: the same bytes for
// any thread count (each output value is summed in one fixed order).
// Throws Error(bad_input) for sizes the layout cannot hold (cpu_layout_fits).
std::vector<float> cpu_experts_moe(CpuLayout layout, const std::vector<float>& x, uint64_t tokens, uint64_t hidden, const Routing& routing,
                                   const std::vector<const CpuExpert*>& experts, const MoeShape& padded, const ActivationSpec& activation,
                                   const CpuExpertsOptions& options = {}, CpuExpertsWorkspace* workspace = nullptr);

// One packed GEMM, out [m, n] = x [m, k] · W^T (+ bias), x given as BF16 bits: what the layer
// runs twice per expert, exposed for tests and benchmarks.
// `kernels` empty: cpu_kernel_choice(isa).
void cpu_packed_gemm(CpuLayout layout, CpuIsa isa, const CpuProjection& w, uint64_t n, uint64_t k, const uint16_t* x_bf16, uint64_t m, float* out,
                     std::optional<CpuKernelChoice> kernels = {});

}  // namespace moepack::experts
