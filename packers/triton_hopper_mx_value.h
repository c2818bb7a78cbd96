// triton_kernels HopperMXValueLayout (mx_axis=1, mma_version=3), v3.5.1: the SM90 MXFP4 weight
// layout of vLLM's OAI Triton MoE, including the 4-nibble bit twiddle.
//
// Upstream definition followed:
//   triton-lang/triton : python/triton_kernels/triton_kernels/tensor_details/layout_details/hopper_value.py @ v3.5.1
//     (`HopperMXValueLayout.swizzle_data`, `_pack_bits`; read in the verbatim vendored copy
//      NVIDIA/TensorRT-LLM : triton_kernels/tensor_details/layout_details/hopper_value.py @ 295cfebe)
//   triton-lang/triton : python/triton_kernels/triton_kernels/tensor.py @ v3.5.1 (`convert_layout`)
//   vllm-project/vllm : vllm/model_executor/layers/quantization/utils/mxfp4_utils.py `_swizzle_mxfp4` @ e9d1398d9
//
// How vLLM gets there: the [E, N, Kb] weight is transposed to a [E, Kb, N] view; because
// mx_axis (1) is the last non-batch-but-one axis, the layout transposes it back (.mT) to the
// contiguous [E, N, Kb], swizzles to a contiguous [E, Np/4, 4*Kbp], twiddles bits, and hands
// the kernel the .mT view [E, 4*Kbp, Np/4]. The storage (what this packer writes) is therefore
// [Np/4, 4*Kbp] per expert, Np = round_up(N, 16), Kbp = round_up(Kb, 32), zero padded.
//
// Index map (before the twiddle), with the digits of n and b:
//   n = 16*m0 + 8*w0 + 2*t0 + s0          (m0 = n/16, w0 = n/8%2, t0 = n/2%4, s0 = n%2)
//   b = 32*k0 + 8*kt + 4*w1 + t1          (k0 = b/32, kt = b/8%4, w1 = b/4%2, t1 = b%4)
//   T[4*m0 + t0][128*k0 + 64*s0 + 16*t1 + 4*kt + 2*w1 + w0] = Q[n][b]
// then every aligned 4-byte group (c0 c1 c2 c3) of T becomes one little-endian 32-bit word:
// lane L (L=0: the low nibbles, L=1: the high nibbles, at bit 16*L) holds the four nibbles
// x0..x3 as  x0: sign->15 mag->8,7,6   x1: sign->12 mag->5,4,3   x2: sign->9 mag->2,1,0
//            x3: sign->14 mag bit2->11 bit1->10 bit0->13
// (each nibble then sits in a bf16's sign/exponent/mantissa bits for the kernel's 14-instruction
// dequant). A group gathers canonical bytes (n,b) (n+8,b) (n,b+4) (n+8,b+4).
//
// Drawn example, one expert, N = 2, Kb = 32 (K = 64): storage [4, 128]; rows 1..3 are padding.
//
//   pre-twiddle row 0, columns 0..127  (q<n,b> = Q[n][b], "." = zero padding)
//     col:   0     1   2     3   4     5   6     7  ...  16    17  18    19 ... 64   ...
//          q<0,0>  .  q<0,4>  .  q<0,8>  .  q<0,12> .  ... q<0,1>  .  q<0,5>  . ... q<1,0> ...
//   i.e. column 16*t1 + 4*kt + 2*w1 holds q<0, 8*kt + 4*w1 + t1>; columns 64.. hold row n=1.
//   Twiddle of one group: bytes 21 43 65 87 -> word 0x40A62C5D -> stored 5D 2C A6 40.
//
// Canonical input: one expert's FP4 weight U8 [N, Kb] = [N, K/2] in vLLM's parameter order
// (for w13 the rows as the converter selected: gpt-oss interleaved, or the generic converter's
// output of vllm.mxfp4_triton_shuffle_weight), I/H padding already applied. Any N, Kb >= 1.
#pragma once

#include <array>

#include "packers/index_map.h"

namespace moepack::packers {

class TritonHopperMXValueLayout final : public IndexMap<TritonHopperMXValueLayout> {
 public:
  static constexpr uint64_t kRowAlign = 16;   // M tile of the swizzle: 2 (scott trick) * 4 threads * 2 warps
  static constexpr uint64_t kByteAlign = 32;  // K tile in bytes: 4 threads * 2 warps * 4 k-subtiles
  // The twiddle, per slot x0..x3 of a 4-byte group: the lane bit (0..15) that nibble bit 0, 1,
  // 2, 3 goes to (bit 3 of the nibble is the sign, bits 2..0 the E2M1 exponent/mantissa).
  // x3 is the irregular one: its bits fill the holes the others leave.
  static constexpr uint8_t kLaneBit[4][4] = {{6, 7, 8, 15}, {3, 4, 5, 12}, {0, 1, 2, 9}, {13, 10, 11, 14}};

  std::string name() const override;
  DType packed_dtype(DType) const override { return DType::U8; }
  Accepts accepts() const override { return {}; }
  Units units(DType) const override { return {.canonical_bits = 1, .packed_bits = 1}; }
  // Bulk path: 64-byte tiles by AVX-512 VBMI byte permutations, or AVX2 dword permutes and
  // in-lane shuffles, where the CPU has them, else pack_portable. Each is checked against
  // pack_by_map (the index map) in the tests.
  void pack(const TensorView& canonical, std::span<uint8_t> packed) const override;
  void pack_portable(const TensorView& canonical, std::span<uint8_t> packed) const;  // tables, any CPU
  // The AVX2 path by itself (tests: pack() prefers VBMI where the CPU has both); only where
  // avx2_available().
  void pack_avx2(const TensorView& canonical, std::span<uint8_t> packed) const;
  static bool avx2_available();
  static bool simd_available();  // whether pack() takes a SIMD path (AVX-512 VBMI or AVX2) on this CPU
  // Bulk inverse by tables (any CPU), checked against unpack_by_map in the tests.
  void unpack(std::span<const uint8_t> packed, OwnedTensor& canonical) const override;

  // Index map, part 1: canonical byte (n, b) -> byte offset in the pre-twiddle buffer (which
  // has the packed shape). Part 2 is the twiddle of the 4-byte group containing that offset.
  static uint64_t pretwiddle_offset(std::span<const uint64_t> canonical_shape, uint64_t n, uint64_t b) {
    return pretwiddle_offset_in(round_up(canonical_shape[1], kByteAlign) * 4, n, b);
  }
  // Part 2: four pre-twiddle bytes -> the 32-bit word stored little-endian in their place.
  static uint32_t twiddle(std::array<uint8_t, 4> group);

  // Units are bits: bit j of canonical byte (n, b) lands in lane j/4 (bits 16*(j/4)..) of the
  // word its pre-twiddle byte belongs to, at kLaneBit[slot][j%4].
  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], bytes = shape[1], out_cols = round_up(bytes, kByteAlign) * 4;
    for (uint64_t n = 0; n < rows; ++n)
      for (uint64_t b = 0; b < bytes; ++b) {
        const uint64_t offset = pretwiddle_offset_in(out_cols, n, b);
        const uint64_t word_bit = (offset - offset % 4) * 8;
        const uint8_t* lane_bit = kLaneBit[offset % 4];
        for (uint64_t j = 0; j < 8; ++j) fn((n * bytes + b) * 8 + j, word_bit + 16 * (j / 4) + lane_bit[j % 4]);
      }
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override {
    return {round_up(shape[0], kRowAlign) / 4, round_up(shape[1], kByteAlign) * 4};
  }

 private:
  static uint64_t pretwiddle_offset_in(uint64_t out_cols, uint64_t n, uint64_t b) {
    const uint64_t m0 = n / 16, w0 = n / 8 % 2, t0 = n / 2 % 4, s0 = n % 2;
    const uint64_t k0 = b / 32, kt = b / 8 % 4, w1 = b / 4 % 2, t1 = b % 4;
    return (4 * m0 + t0) * out_cols + 128 * k0 + 64 * s0 + 16 * t1 + 4 * kt + 2 * w1 + w0;
  }
};

}  // namespace moepack::packers
