// Marlin layouts of integer weight-only (WNA16) MoE experts: GPTQ / compressed-tensors / AWQ
// int4 and int8 weights repacked for `moe_wna16_marlin_gemm`, their group scales, zero points.
//
// Upstream (vllm-project/vllm @ e9d1398d9):
//   vllm/model_executor/layers/fused_moe/oracle/int_wna16.py `_process_weights_marlin`,
//     `_process_awq_weights_marlin` (the per-expert loops below, 16-bit activations)
//   csrc/libtorch_stable/quantization/marlin/gptq_marlin_repack.cu, awq_marlin_repack.cu
//   vllm/model_executor/layers/quantization/utils/marlin_utils.py `get_scale_perms`,
//     `marlin_permute_scales`, `marlin_zero_points`, `awq_to_marlin_zero_points`,
//     `moe_packed_to_marlin_zero_points`; quant_utils.py `pack_cols` / `unpack_cols`
//   layouts-marlin-vnni-e8m0.md 2.2-2.7 (closed forms, worked examples); ERRATA 5, 6, 9.
//
// ---- weight (gptq_marlin_repack / awq_marlin_repack, is_a_8bit=0) --------------------------------
// q[k][n] = the b-bit code of input row k, output column n (b = 4 or 8, pf = 32/b per word).
// Sources: GPTQ / compressed-tensors (loaded transposed) I32 [K/pf, N], code q[k][n] = field k%pf
// of word (k/pf, n); AWQ I32 [K, N/pf], code q[k][n] = field UNDO[n%pf] of word (k, n/pf),
// UNDO4 = 0 4 1 5 2 6 3 7, UNDO8 = 0 2 1 3 (AWQ stores column 8w+[0,2,4,6,1,3,5,7][j] in field j).
// Packed: I32 [K/16, N*b/2], tile-major: 16x64 tile (kt, nt) = 1024/pf words from
// (kt*(N/64) + nt) * (1024/pf). With kk = k%16, nn = n%64, w = nn/16 (warp), c8 = nn%8,
// h = (nn%16)/8, t = 4*c8 + (kk%8)/2 (lane), up = kk/8, d = kk%2:
//   4-bit: word 4t + w of the tile, nibble INV4[4h + 2up + d], INV4 = 0 4 1 5 2 6 3 7
//   8-bit: word 8t + 2w + h of the tile, byte INV8[2up + d],    INV8 = 0 2 1 3
//   drawn, 4-bit word 4t+w (r = 2*(t%4), c = 64nt + 16w + t/4):
//     nibble : 0      1        2        3          4        5        6          7
//     q      : [r][c] [r+8][c] [r][c+8] [r+8][c+8] [r+1][c] [r+9][c] [r+1][c+8] [r+9][c+8]
//   Worked example (spec 2.2, K=16, N=64, q[k][n] = (k+n)%16): word 0 = 0x19910880, word 4 =
//   0x3bb32aa2, word 16 = 0x2aa21991; 8-bit q = (16k+n)%256: word 0 = 0x90108000, word 1 = 0x98188808.
// Act-order (ERRATA 5: the repack still takes the perm) gathers the K rows by the g_idx sort
// indices before this map; that gather is data-dependent and done by the converter
// (lib/convert/wna16_marlin.h), the layout here is the fixed part. Needs K % 16, N % 64.
//
// ---- scales (marlin_moe_permute_scales, per expert) ------------------------------------------------
// S float [G, N] (GPTQ orientation), flat f = g*N + x. "grouped" (group_size != -1 and
// group_size < size_k): out[64b + 8i + j] = S[64b + i + 8j]; otherwise "single":
// out[32b + 8i + x] = S[32b + 2i + X[x]], X = 0 1 8 9 16 17 24 25. vLLM passes size_k =
// intermediate_size_per_partition for w13 (GPTQ, compressed-tensors, AWQ) and for AWQ's w2 too,
// so w13 with I <= group_size gets "single" although H/group_size > 1 groups exist: reproduced
// (ERRATA 9); the oracle row picks the variant. Values cast to params_dtype (torch copy_ on load).
//
// ---- zero points (marlin_zero_points after unpack_cols, or the AWQ de-interleave) ----------------
// Z I32 [G, N/pf] packed along N: sequential (GPTQ qzeros, compressed-tensors weight_zero_point:
// field i of word (g, w) = column pf*w + i; GPTQ v1 keeps zero-1 and vLLM does not add 1, so the
// codes move unchanged, ERRATA 6) or AWQ-interleaved (field UNDO[c] holds column 8w + c).
// z[f] (f = g*N + n) -> A[64b + 8i + j] = z[64b + i + 8j] (always the grouped permutation) ->
// B[8c + y] = A[8c + ORD4[y]] (4-bit, ORD4 = 0 2 4 6 1 3 5 7; 8-bit: B[4c + y] = A[4c + ORD8[y]],
// ORD8 = 0 2 1 3) -> packed sequentially: field f%pf of word f/pf = B[f]. Needs N % 64.
#pragma once

#include <array>

#include "packers/index_map.h"

namespace moepack::packers {

enum class IntSource { gptq, awq };  // gptq: packed along K (GPTQ, compressed-tensors); awq: along N, interleaved

class MarlinIntWeightLayout final : public IndexMap<MarlinIntWeightLayout> {
 public:
  MarlinIntWeightLayout(unsigned bits, IntSource source) : bits_(bits), source_(source) {}
  std::string name() const override;
  DType packed_dtype(DType) const override { return DType::I32; }
  Accepts accepts() const override;
  Units units(DType) const override { return {.canonical_bits = bits_, .packed_bits = bits_}; }

  uint64_t pack_factor() const { return 32 / bits_; }
  // Logical (K, N) of a canonical shape.
  std::pair<uint64_t, uint64_t> size_kn(std::span<const uint64_t> shape) const {
    return source_ == IntSource::gptq ? std::pair{shape[0] * pack_factor(), shape[1]} : std::pair{shape[0], shape[1] * pack_factor()};
  }
  // Unit (code) index of q[k][n] in the canonical tensor and in the packed tensor.
  uint64_t canonical_unit(uint64_t k, uint64_t n, uint64_t size_n) const;
  uint64_t packed_unit(uint64_t k, uint64_t n, uint64_t size_n) const;

  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const auto [size_k, size_n] = size_kn(shape);
    for (uint64_t k = 0; k < size_k; ++k)
      for (uint64_t n = 0; n < size_n; ++n) fn(canonical_unit(k, n, size_n), packed_unit(k, n, size_n));
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override {
    const auto [size_k, size_n] = size_kn(shape);
    return {size_k / 16, size_n * bits_ / 2};
  }

 private:
  unsigned bits_;
  IntSource source_;
};

class MarlinIntScaleLayout final : public IndexMap<MarlinIntScaleLayout> {
 public:
  MarlinIntScaleLayout(bool grouped, DType params_dtype) : grouped_(grouped), params_dtype_(params_dtype) {}
  std::string name() const override;
  DType packed_dtype(DType) const override { return params_dtype_; }
  Accepts accepts() const override;
  Units units(DType canonical) const override {
    return {.canonical_bits = static_cast<unsigned>(dtype_bits(canonical)), .packed_bits = static_cast<unsigned>(dtype_bits(params_dtype_)),
            .converts = true};
  }
  // Packed flat position f takes canonical flat position source(f).
  uint64_t source(uint64_t f) const;

  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t total = shape[0] * shape[1];
    for (uint64_t f = 0; f < total; ++f) fn(source(f), f);
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape[0], shape[1]}; }

 private:
  bool grouped_;
  DType params_dtype_;
};

class MarlinIntZeroPointLayout final : public IndexMap<MarlinIntZeroPointLayout> {
 public:
  MarlinIntZeroPointLayout(unsigned bits, IntSource source) : bits_(bits), source_(source) {}
  std::string name() const override;
  DType packed_dtype(DType) const override { return DType::I32; }
  Accepts accepts() const override;
  Units units(DType) const override { return {.canonical_bits = bits_, .packed_bits = bits_}; }

  uint64_t pack_factor() const { return 32 / bits_; }
  // Packed unit f (= flat zero-point position of the output) takes canonical unit source_unit(f).
  uint64_t source_unit(uint64_t f) const;

  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t total = shape[0] * shape[1] * pack_factor();
    for (uint64_t f = 0; f < total; ++f) fn(source_unit(f), f);
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape[0], shape[1]}; }

 private:
  unsigned bits_;
  IntSource source_;
};

}  // namespace moepack::packers
