// vLLM's FP8 Marlin weight input: an expert's FP8 weight [N, K] seen as GPTQ-packed int32 words
// [K/4, N], which gptq_marlin_repack with num_bits = 8 then tiles (packers/marlin_wna16.h).
//
// Upstream definition followed:
//   vllm-project/vllm @ e9d1398d9 : quantization/utils/marlin_utils_fp8.py
//   `prepare_fp8_moe_layer_for_marlin` -> repack_weight: pack_fp8_to_int32(w, size_k_first=False)
//   (w.view(torch.int32): four consecutive K bytes of a row make one little-endian word, [N, K/4])
//   then .T.contiguous() -> [K/4, N]; then ops.gptq_marlin_repack(perm=empty, num_bits=8).
//
// Index map in bytes: byte (n, k) -> byte 4*((k/4)*N + n) + k%4 of [K/4, N] I32.
//   drawn, N = 2, K = 8:  canonical row 0 = a0..a7, row 1 = b0..b7
//                         packed words: (0,0)=a0a1a2a3 (0,1)=b0b1b2b3 (1,0)=a4a5a6a7 (1,1)=b4b5b6b7
// Canonical input: one expert's F8_E4M3 weight [N, K], K % 4 == 0 (the Marlin repack after it
// needs K % 16 and N % 64).
#pragma once

#include "packers/index_map.h"

namespace moepack::packers {

class Fp8AsGptqInt32Layout final : public IndexMap<Fp8AsGptqInt32Layout> {
 public:
  std::string name() const override;
  DType packed_dtype(DType) const override { return DType::I32; }
  Accepts accepts() const override;
  Units units(DType) const override { return {.canonical_bits = 8, .packed_bits = 8}; }

  template <class Fn>
  void visit(DType, std::span<const uint64_t> shape, Fn&& fn) const {
    const uint64_t rows = shape[0], cols = shape[1];
    for (uint64_t n = 0; n < rows; ++n)
      for (uint64_t k = 0; k < cols; ++k) fn(n * cols + k, 4 * ((k / 4) * rows + n) + k % 4);
  }

 protected:
  std::vector<uint64_t> packed_shape_of(std::span<const uint64_t> shape) const override { return {shape[1] / 4, shape[0]}; }
};

}  // namespace moepack::packers
