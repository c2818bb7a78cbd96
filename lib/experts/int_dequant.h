// Integer weight-only (WNA16) experts: GPTQ, AWQ and compressed-tensors pack-quantized weights
// as vLLM's loaders hold them, "transposed" (the input dimension K along rows, the output N along
// columns). pf = 32 / bits codes per I32 word.
//
//   packing   codes (I32)                                      zero points (I32, when present)
//   k_packed  [K/pf, N]: (k, n) is field k%pf of word (k/pf, n)  [G, N/pf]: (g, n) is field n%pf
//             (GPTQ qweight, compressed-tensors weight_packed)   of word (g, n/pf)
//   awq       [K, N/pf]: (k, n) is field awq(n%pf) of word      the same AWQ field order
//             (k, n/pf), awq = {0,4,1,5,2,6,3,7} (4 bit),
//             {0,2,1,3} (8 bit): AutoAWQ's AWQ_ORDER undone
// Field i of a word is bits [i*bits, (i+1)*bits).
//
//   value(k, n) = (code(k, n) - zero(g, n)) * scale[g][n]
//   zero = 2^(bits-1) without zero points (vLLM's uint4b8 / uint8b128: GPTQ is symmetric only,
//          its stored qzeros are not read by the kernel; compressed-tensors symmetric)
//   zero = zero_values[g][n] when the zero points come unpacked, one I8 per (group, output):
//          what vLLM's CPU INT4 kernel subtracts (lib/convert/cpu_int4.h: GPTQ's stored z-1
//          plus 1, AWQ's as stored, 8 for compressed-tensors symmetric)
//   g    = g_idx[k] with act-order, else k / (K / G) (G = 1: channel-wise)
// (vllm e9d1398d9: quantization/auto_gptq.py TYPE_MAP, auto_awq.py, compressed_tensors_moe_wna16.py.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/core/tensor.h"

namespace moepack::experts {

enum class IntPacking { k_packed, awq };

struct IntWeight {
  IntPacking packing = IntPacking::k_packed;
  const OwnedTensor* codes = nullptr;   // I32
  const OwnedTensor* scales = nullptr;  // [G, N], BF16 / F16 / F32
  const OwnedTensor* zeros = nullptr;   // I32 [G, N/pf], or null: symmetric
  const OwnedTensor* g_idx = nullptr;   // I32 [K], or null: groups in order
  const OwnedTensor* zero_values = nullptr;  // I8 [G, N] unpacked zero points (overrides zeros)
};

// The bits per code the shapes imply for an [N, K] weight (4 or 8); Error(bad_input) naming
// `where` when they imply none.
unsigned int_weight_bits(const IntWeight& w, uint64_t n, uint64_t k, const std::string& where);

// One expert's weight as floats [N, K] row-major (output rows, as dequantize() returns).
// Error(bad_input) naming `where` when a shape disagrees or a g_idx element is out of range.
std::vector<float> dequantize_int(const IntWeight& w, uint64_t n, uint64_t k, const std::string& where);

// CUTLASS W4A8 (w4a8_fp8): int4 codes as compressed-tensors stores them, NOT transposed: I32
// [N, K/8], code (n, k) = field k%8 of word (n, k/8), uint4b8 (w = code - 8); and, per output
// row and group of K/G inputs, the 16 values the kernel multiplies for codes 0..15: F32
// [N, 16 G] (lib/convert/w4a8_cutlass.h builds them from the FP8 lookup tables and channel
// scales). value(n, k) = table[n][16 (k / (K/G)) + code(n, k)].
std::vector<float> dequantize_int4_table(const OwnedTensor& codes, const OwnedTensor& table, uint64_t n, uint64_t k, const std::string& where);

}  // namespace moepack::experts
