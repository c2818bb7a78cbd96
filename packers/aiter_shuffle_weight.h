// AITER `shuffle_weight` with layout (16, 16) for one-byte elements: the MXFP4 weight preshuffle
// of the AITER CK / FlyDSL MoE kernels on ROCm (gfx950), in its three forms.
//
// Upstream definitions followed:
//   ROCm/aiter : aiter/ops/shuffle.py @ v0.1.19
//     `shuffle_weight` (plain branch: view [-1, N/16, 16, C/32, 2, 16], permute (0,1,3,4,2,5);
//      `is_guinterleave` branch: view [E, N0, 16, C/64, 4, 16] permute (0,1,3,4,2,5), or with
//      `gate_up` view [E, 2, N0, 16, C/64, 4, 16] permute (0,2,1,4,5,3,6), N0 = rows/16 per half),
//     `shuffle_weight_a16w4(src, NLane, gate_up)` = the `is_guinterleave` branch with layout
//      (NLane, 16); vLLM always passes NLane = 16, so it is the same transform.
//   vllm-project/vllm : vllm/_aiter_ops.py (`shuffle_weights`, `shuffle_weight_a16w4`) and
//     vllm/model_executor/layers/fused_moe/oracle/mxfp4.py @ e9d1398d9 (the callers; see
//     the AITER path table in registry.cpp for which path uses which form).
//   The FP4 tensor is viewed as uint8 first (element size 1), so the 16-element inner run is
//   16 bytes = 32 FP4 codes; bytes move whole, nibble order inside a byte is unchanged.
//
// All three forms cut one expert's [N, C] byte matrix into 16-row x 16-byte tiles and store the
// tiles one after the other, each tile row-major (16 bytes of row 0, then of row 1, ...). They
// differ only in the order of the 16-row blocks and in the sizes they accept:
//   plain                        blocks in row order;            N % 16 == 0, C % 32 == 0
//   is_guinterleave, gate_up=0   blocks in row order;            N % 16 == 0, C % 64 == 0
//   is_guinterleave, gate_up=1   gate block 0, up block 0,       N % 32 == 0, C % 64 == 0
//                                gate block 1, up block 1, ...   (rows [gate; up], I = N/2)
// (plain and gate_up=0 give the same bytes; they are separate ids because torch refuses
// different sizes and because vLLM reaches them through different calls.)
//
// Index map (one expert, canonical byte (n, kb)):
//   block B = n/16                                         (plain, gate_up=0)
//   block B = 2*((n % (N/2)) / 16) + n / (N/2)             (gate_up=1)
//   offset  = ((B * (C/16) + kb/16) * 16 + n % 16) * 16 + kb % 16
//
// Drawn example, gate_up=1, N = 64 (I = 32), C = 64 bytes (K = 128):
//   canonical tiles T<rows, bytes>         bytes 0-15  16-31  32-47  48-63
//     gate rows  0-15  (rows  0-15)          A0          A1     A2     A3
//     gate rows 16-31  (rows 16-31)          B0          B1     B2     B3
//     up   rows  0-15  (rows 32-47)          C0          C1     C2     C3
//     up   rows 16-31  (rows 48-63)          D0          D1     D2     D3
//   packed tiles, 256 bytes each:  A0 A1 A2 A3 C0 C1 C2 C3 B0 B1 B2 B3 D0 D1 D2 D3
//   (gate_up=0 and plain:          A0 A1 A2 A3 B0 B1 B2 B3 C0 C1 C2 C3 D0 D1 D2 D3)
//   packed bytes 0..15 = row 0 bytes 0..15, 16..31 = row 1 bytes 0..15, ..., 240..255 = row 15
//   bytes 0..15, 256..271 = row 0 bytes 16..31, ..., 1024..1039 = row 32 bytes 0..15.
//
// Wider elements (the plain form only): shuffle_weight splits a row into runs of 16 bytes
// (16 / element_size elements, K = 8 for BF16/FP16) inside 32-element blocks, so for any element
// width the bytes are the same 16-row x 16-byte tiles and only the size rule is in elements
// (K % 32). vLLM's FP8 (oracle/fp8.py) and unquantized (oracle/unquantized.py,
// `convert_to_unquantized_kernel_format`) AITER backends call it through
// `rocm_aiter_ops.shuffle_weights` on E4M3 bytes and on BF16/FP16 weights.
//
// Canonical input: one expert's MXFP4 weight, U8 [N, K/2] (two E2M1 codes per byte, low nibble =
// even column; any one-byte dtype is accepted and kept), zero padding of I and H already applied
// by the loader (ROCm: 256, or 128 for AITER_MXFP4_BF16 with SILU/SITU). Row order: gate_up=1
// expects [gate rows; up rows] — the generic converter's [w1; w3] as loaded, or gpt-oss' rows
// after `vllm.aiter_deinterleave_gate_up_rows`; the other forms keep whatever row order they get.
// The packed tensor has the same dtype and shape [N, K/2]; the parameter is [E, N, K/2].
#pragma once

#include "packers/index_map.h"

namespace moepack::packers {

enum class AiterWeightShuffle { plain, guinterleave, guinterleave_gate_up };

class AiterShuffleWeightLayout final : public IndexMap<AiterShuffleWeightLayout> {
 public:
  // The tile: 16 rows (NLane) by 16 bytes (the 16-byte load of one lane).
  static constexpr uint64_t kTileRows = 16;
  static constexpr uint64_t kTileBytes = 16;

  explicit AiterShuffleWeightLayout(AiterWeightShuffle variant) : variant_(variant) {}

  std::string name() const override;
  DType packed_dtype(DType canonical) const override { return canonical; }
  Accepts accepts() const override;
  Units units(DType canonical) const override;
  void pack(const TensorView& canonical, std::span<uint8_t> packed) const override;  // bulk: 16-byte runs

  // Index map: canonical byte (n, kb) of an [N, C] expert lands in tile (B, kb/16) of packed
  // 16-row block B, at row n%16 and byte kb%16:
  //   offset = ((B * (C/16) + kb/16) * 16 + n%16) * 16 + kb%16
  //   B = n/16, or with gate_up 2*((n % (N/2)) / 16) + n / (N/2) (gate and up blocks alternate)
  // In elements of width w bytes the run is r = 16 / w elements (r = 16 for one-byte elements):
  //   offset = ((B * (C/r) + k/r) * 16 + n%16) * r + k%r
  template <class Fn>
  void visit(DType dtype, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], cols = shape[1], half = rows / 2, run = run_elements(dtype);
    for (uint64_t n = 0; n < rows; ++n) {
      const uint64_t block = variant_ == AiterWeightShuffle::guinterleave_gate_up ? 2 * ((n % half) / kTileRows) + n / half
                                                                                 : n / kTileRows;
      const uint64_t row = block * cols * kTileRows + (n % kTileRows) * run;
      for (uint64_t k = 0; k < cols; ++k) fn(n * cols + k, row + (k / run) * kTileRows * run + k % run);
    }
  }
  static uint64_t run_elements(DType dtype) { return kTileBytes * 8 / static_cast<uint64_t>(dtype_bits(dtype)); }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape[0], shape[1]}; }

 private:
  AiterWeightShuffle variant_;
};

}  // namespace moepack::packers
