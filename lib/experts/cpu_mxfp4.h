// Fast CPU experts for the `cpu-amx` MXFP4 artifact: they read the sgl-kernel packed layout
// directly (packers/cpu_sgl_mxfp4.h), never unpacking it.
//
// The packed weight stores each block of 32 output rows as, for every pair of input columns
// (k, k+1), 32 bytes whose low nibbles are rows 0-15 and high nibbles rows 16-31, each row's two
// codes adjacent:
//
//     byte j of column pair kb:  low = W[r = j/2][2kb + j%2],  high = W[16 + j/2][2kb + j%2]
//
// which is exactly the VNNI-2 operand of `vdpbf16ps`: decoding the 32 low nibbles through a
// 16-entry E2M1 -> BF16 table (`vpermw`) gives rows 0-15 as (k, k+1) BF16 pairs, and one
// instruction against the broadcast activation pair adds W[r][k]·x[k] + W[r][k+1]·x[k+1] to 16
// row accumulators. The E8M0 scales are packed per block as [groups, 32 rows], so the 16 scales
// of a group's rows are one contiguous load; they multiply the group's partial sums (a power of
// two: exact). AMX is not needed: vLLM's CPU MXFP4 path requires it, these kernels run the same
// artifact on AVX-512 BF16 machines, on AVX2 machines (E2M1 decoded to float with vpermps, FMA),
// and fall back to portable C++ elsewhere (AMX tiles are not used yet).
//
// Numerics: activations are rounded to BF16 before each GEMM (as vLLM's CPU kernels take
// them), weights are exact in BF16, products accumulate in FP32. Against the double-precision
// reference the relative error is a few 1e-3 (moepack-verify(1) documents the tolerance).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lib/experts/moe.h"
#include "lib/experts/routing.h"

namespace moepack::experts {

// One expert's packed tensors (the per-expert slabs of the artifact, not copied).
struct CpuMxfp4Expert {
  const uint8_t* w13 = nullptr;        // [n13, Hp/2] sgl packed
  const uint8_t* w13_scale = nullptr;  // [n13, Hp/32] sgl packed E8M0
  const uint8_t* w2 = nullptr;         // [Hp, P/2]
  const uint8_t* w2_scale = nullptr;   // [Hp, P/32]
  const float* w13_bias = nullptr;     // [n13] or null
  const float* w2_bias = nullptr;      // [Hp] or null
};

// The instruction sets a kernel can use, best first; the list ends with the portable one.
enum class CpuIsa { avx512_bf16, avx2, scalar };
std::string_view cpu_isa_name(CpuIsa isa);
bool cpu_supports(CpuIsa isa);
// The best kernel this machine runs, from the ordered list avx512_bf16, avx2, scalar (CPU
// features probed once). MOEPACK_CPU_ISA=avx2 or =scalar picks that one (tests compare them).
CpuIsa best_cpu_isa();

struct CpuMxfp4Options {
  int threads = 0;  // 0: oneTBB's default
  CpuIsa isa = best_cpu_isa();
};

// Buffers a caller keeps across forward passes so they allocate nothing but their output.
struct CpuMxfp4Workspace {
  std::vector<std::vector<std::pair<uint32_t, float>>> tokens_of_expert;  // (token, routing weight)
  std::vector<float> x, h, act, y;
  std::vector<uint16_t> x_bf16, act_bf16;
};

// The layer's output [T, H] for hidden states [T, H] (H <= Hp; zero-padded to Hp inside).
// `experts[e]` is null when this rank does not hold expert e. Deterministic: the same bytes
// for any thread count (each output value is summed in one fixed order).
// Throws Error(bad_input) for shapes the packed layout cannot hold (rows or K not multiples of 32).
std::vector<float> cpu_mxfp4_moe(const std::vector<float>& x, uint64_t tokens, uint64_t hidden, const Routing& routing,
                                 const std::vector<const CpuMxfp4Expert*>& experts, const MoeShape& padded, const ActivationSpec& activation,
                                 const CpuMxfp4Options& options = {}, CpuMxfp4Workspace* workspace = nullptr);

}  // namespace moepack::experts
