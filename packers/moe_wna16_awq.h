// vLLM's MoeWNA16 method on an AutoAWQ checkpoint (`--quantization moe_wna16`): its weight loader
// turns AWQ's K-first int32 words into the N-first uint8 pairs fused_moe_kernel_gptq_awq reads,
// and convert_to_wna16_moe_kernel_format's TRITON branch keeps them (a uint8 view).
//
// Upstream definition followed:
//   vllm-project/vllm @ e9d1398d9 : vllm/model_executor/layers/quantization/moe_wna16.py
//   `MoeWNA16Method.get_weight_loader` -> `convert_awq_tensor` (int4 only; the loader asserts it):
//     view as uint8, split every byte into its two nibbles (low first), put each word's eight
//     nibbles back in column order (AutoAWQ packs columns 0,2,4,6,1,3,5,7 into nibbles 0..7; the
//     loader's index list [0,4,1,5,2,6,3,7] undoes it), transpose, and pack pairs along the new
//     last axis with the even index in the low nibble:
//       qweight [K, N/8] I32 -> [N, K/2] U8   byte (n, k/2) = code(k+1, n) << 4 | code(k, n), k even
//       qzeros  [G, N/8] I32 -> [N/2, G] U8   byte (n/2, g) = zero(g, n+1) << 4 | zero(g, n), n even
//   The values are AWQ's own (no +1, unlike the loader's GPTQ zero points).
//
// Index map in 4-bit units, with awq_column = {0, 2, 4, 6, 1, 3, 5, 7} (the column nibble i of a
// word holds): canonical nibble i of word (r, w) is column n = 8w + awq_column[i] of row r;
//   weights       packed nibble n * K + r                 (row r = input k)
//   zero points   packed nibble ((n / 2) * G + r) * 2 + n % 2   (row r = group g)
// Drawn, weights, K = 2, N = 8 (one word per row), code(k, n) written kn:
//   canonical word (0, 0) nibbles 0..7 = 00 02 04 06 01 03 05 07, word (1, 0) = 10 12 14 16 11 13 15 17
//   packed [8, 1] bytes: row n = (1n << 4 | 0n), rows in n order 0..7
//
// Canonical input: one expert's loaded I32 param (2-D), as vLLM's AutoAWQ loader slices it for the
// rank (the same rows and 8-column words MoeWNA16's loader takes, lib/convert/wna16_marlin.h).
#pragma once

#include <array>

#include "packers/index_map.h"

namespace moepack::packers {

// The column that nibble i of an AutoAWQ int4 word holds (AutoAWQ's pack order).
inline constexpr std::array<uint64_t, 8> kAwqColumnOfNibble = {0, 2, 4, 6, 1, 3, 5, 7};

enum class MoeWna16AwqTensor { qweight, qzeros };

class MoeWna16AwqLayout final : public IndexMap<MoeWna16AwqLayout> {
 public:
  explicit MoeWna16AwqLayout(MoeWna16AwqTensor tensor) : tensor_(tensor) {}
  std::string name() const override;
  DType packed_dtype(DType) const override { return DType::U8; }
  Accepts accepts() const override;
  Units units(DType) const override { return {.canonical_bits = 4, .packed_bits = 4}; }

  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], words = shape[1];
    for (uint64_t r = 0; r < rows; ++r)
      for (uint64_t w = 0; w < words; ++w)
        for (uint64_t i = 0; i < 8; ++i) {
          const uint64_t n = 8 * w + kAwqColumnOfNibble[i];
          const uint64_t canonical = (r * words + w) * 8 + i;
          if (tensor_ == MoeWna16AwqTensor::qweight) fn(canonical, n * rows + r);
          else fn(canonical, ((n / 2) * rows + r) * 2 + n % 2);
        }
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override {
    if (tensor_ == MoeWna16AwqTensor::qweight) return {8 * shape[1], shape[0] / 2};
    return {4 * shape[1], shape[0]};
  }

 private:
  MoeWna16AwqTensor tensor_;
};

}  // namespace moepack::packers
