// vLLM's CPU INT4 W4A16 experts (CPUExpertsInt4, backend CPU of the WNA16 oracle): the outputs
// of sgl-kernel's convert_weight_packed_scale_zp that are not an index map of one loaded param,
// as ExpertDerivations (lib/convert/derivations.h) ending in the registered packers of
// packers/cpu_sgl_int4.h, and the layers vLLM loads on this backend but computes wrongly.
//
// Upstream (vllm-project/vllm @ e9d1398d9): fused_moe/oracle/int_wna16.py `_process_weights_cpu`,
// fused_moe/experts/cpu_moe.py `prepare_int4_moe_layer_for_cpu` and CPUExpertsInt4.apply,
// csrc/cpu/sgl-kernels/gemm_int4.cpp `convert_weight_packed_scale_zp`,
// `unpack_4bit_to_32bit_signed`, `convert_int4_weight_packed_with_compensation`,
// csrc/cpu/sgl-kernels/moe_int4.cpp `fused_experts_int4_w4a8_kernel_impl`.
//
// Zero points. The op unpacks them to one int8 per (group, output), z[g][n], in one of three ways
// (the `zeros=` of the ids below):
//   qzeros_plus_1        GPTQ / compressed-tensors (CPUQuantAlgo.GPTQ): field n%8 of word
//                        (g, n/8), plus 1 (unpack_4bit_to_32bit_signed returns zeros + 1:
//                        GPTQ v1 stores zero - 1)
//   awq_qzeros           AutoAWQ (CPUQuantAlgo.AWQ): field AWQ[n%8] of word (g, n/8), as stored
//   synthetic_0x77777777 no zero-point param (compressed-tensors symmetric):
//                        prepare_int4_moe_layer_for_cpu fills 0x77777777, the GPTQ unpack adds
//                        1: every z is 8 (uint4b8)
// Layout ids (the oracle's, family_wna16.cpp):
//   cpu.sgl_int4_zero_points(zeros=<how>,e9d1398d9) | cpu.sgl_int4_blocked_zero_points(i8,e9d1398d9)
//       I8 [N/32, G, 32]; unpacks to z as I8 [G, N], the zero points the kernel subtracts
//   cpu.sgl_int4_compensation(zeros=<how>,e9d1398d9) | cpu.sgl_int4_weight_packed(<src>,block_k=B,e9d1398d9)
//       the weight's codes through the packer, then in every block (nc, kc) the 32 int32
//       compensation[j] = sum over k in [kc*B, (kc+1)*B) of (q[k][n] - z[k / (K/G)][n]),
//       n = 32nc + j (Σ(W - ZP) of convert_int4_weight_packed_with_compensation); unpacks to the
//       loaded weight. Example: B = 32, every q = 9 and z = 8 -> every sum 32 (bytes 20 00 00 00).
// The synthetic zero points read the scales param for their shape [G, N].
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>

#include "formats/checkpoints/checkpoint.h"
#include "lib/convert/derivations.h"
#include "lib/oracle/oracle.h"

namespace moepack::convert {

// nullptr when `layout_id` is none of the ids above. `available` are the layer's loaded params.
std::shared_ptr<const ExpertDerivation> make_cpu_int4_derivation(const std::string& role, const std::string& layout_id, const std::set<std::string>& available,
                                                                 const ckpt::MoeLayer& layer);

// Whether `layout_id` is one of the ids above (the runtime reads them through their packer).
bool is_cpu_int4_derivation(const std::string& layout_id);

// Why a WNA16 layer the oracle gives backend CPU cannot be converted (vLLM fails while loading it,
// or loads it and computes another layer); nullopt when it can. `d` is the layer's decision.
std::optional<std::string> cpu_int4_refusal(const ckpt::MoeLayer& layer, const oracle::Decision& d);

}  // namespace moepack::convert
