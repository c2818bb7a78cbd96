// vLLM's CPU INT8 W8A8 weights (CPUExpertsInt8): sgl-kernel's convert_weight_packed for int8,
// the VNNI-4 byte permutation (packers/cpu_sgl_mxfp4.h CpuSglVnni4Int8Layout) plus the s8s8
// compensation sums it appends after each 32-row block. The sums are values computed from the
// weight, so the output is an ExpertDerivation (lib/convert/derivations.h) whose bytes unpack
// through the packer (the sums are ignored there, recomputed by the integrity check).
//
//   cpu.sgl_s8s8_compensation(e9d1398d9) | cpu.sgl_convert_weight_packed(int8,vnni4)
//     block nb, row n: int32 at byte 32*nb*(K+4) + 32*K + 4*n = 128 * sum_k w[32*nb + n][k]
//   Example: a row of K = 32 ones -> 4096 (bytes 00 10 00 00); of -1s -> -4096 (00 F0 FF FF).
// Upstream: vllm-project/vllm @ e9d1398d9 csrc/cpu/sgl-kernels/gemm.cpp `pack_vnni<int8_t>`,
// `s8s8_compensation` (_mm512_dpbusd_epi32 of 0x80 bytes with the packed weights).
#pragma once

#include <memory>
#include <string>

#include "lib/convert/derivations.h"

namespace moepack::convert {

// nullptr when `layout_id` is not the CPU INT8 pack. `role` is the weight param.
std::shared_ptr<const ExpertDerivation> make_cpu_int8_packed(const std::string& role, const std::string& layout_id);

}  // namespace moepack::convert
