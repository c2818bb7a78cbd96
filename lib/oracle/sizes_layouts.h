// Per-rank sizes after a backend's round-up, and the layout each tensor role gets — the two
// facts the converter needs from a decision (internal to lib/oracle).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lib/oracle/family.h"

namespace moepack::oracle {

// The hidden round-up every method inherits (FusedMoEMethodBase.maybe_roundup_sizes ->
// maybe_roundup_layer_hidden_size): DeepEP high-throughput and v2 round hidden*itemsize up to
// 512 bytes; DeepEP low-latency and NIXL-EP round up to their supported hidden sizes.
int all2all_rounded_hidden(int hidden, FloatType act_dtype, const MoeParallelConfig& parallel);

// The per-rank sizes the converted expert weights have — what Decision::padded_* and
// `plan --json` report, and what a packer pads to. vLLM grows the sizes in two places, both
// counted here, in this order:
//  1. Allocation (maybe_roundup_sizes, before create_weights): the all2all hidden round-up every
//     method inherits, then the method's own (MethodRow::round_up): the MXFP4 methods' backend
//     rule (family_mxfp4.cpp) and Fp8PerBlockOnlineMoEMethod's round-up of both sizes to its
//     128 block.
//  2. Weight conversion (convert_to_*_moe_kernel_format, after loading; the family's
//     FamilyDescriptor::conversion_padding): zero padding some backends add to the already
//     allocated tensors; vLLM then runs the kernel at the padded size (it rewrites
//     moe_config.hidden_dim / intermediate_size_per_partition, or Marlin repacks at the padded
//     extent), so the converted tensors carry it and so must ours:
//       NVFP4 FLASHINFER_TRTLLM  hidden -> 256; intermediate -> 64 gated, 128 otherwise
//                                (align_trtllm_fp4_moe_hidden_dim_for_fi, align_fp4_moe_weights_for_fi)
//       NVFP4 B12X               gated: intermediate -> 64 (_pad_gated_weights); otherwise the
//                                scale swizzle's 128-row padding is copied onto the weights
//       NVFP4 FLASHINFER_CUTLASS, VLLM_CUTLASS, FLASHINFER_CUTEDSL_BATCHED, FLASHINFER_B12X
//                                non-gated: intermediate -> 128 (swizzle_blockscale rows);
//                                gated with 2*I % 128 != 0: NotImplementedError (raised here)
//       NVFP4 MARLIN             intermediate -> 64 when hidden % 128 == 0, else 128
//                                (prepare_nvfp4_moe_layer_for_marlin)
//       FP8 per-tensor/channel on FLASHINFER_CUTLASS / FLASHINFER_TRTLLM
//                                intermediate -> 16 gated, 128 otherwise (prepare_fp8_moe_layer_for_fi)
//       FP8 / MXFP8 MARLIN       intermediate -> lcm(64, block column) (marlin_moe_padded_intermediate;
//                                channel/tensor FP8: 64, 128-block: 128, MXFP8: 64)
//       WNA16 MARLIN, BATCHED_MARLIN (GPTQ, AWQ, compressed-tensors)
//                                intermediate -> lcm(64, group) (marlin_moe_padded_intermediate)
//       unquantized FLASHINFER_TRTLLM, non-gated
//                                intermediate -> 128 (convert_to_unquantized_kernel_format)
//     Not counted: padding that never changes a weight's logical extent (swizzle_blockscale on
//     the scale tensors alone, ROCm's VLLM_ROCM_MOE_PADDING stride padding, the CPU experts'
//     run-time intermediate alignment of their workspaces).
// Throws OracleRaise for the shapes the conversion refuses.
std::pair<int, int> padded_sizes(const FamilyDescriptor& family, const MethodRow& method, const Selection& s, const SelectionContext& ctx);

// Layout name per tensor role for a selection (the family's first matching LayoutRow), as the
// converter will name its transforms.
std::vector<std::pair<std::string, std::string>> tensor_layouts(const FamilyDescriptor& family, const Selection& s, const SelectionContext& ctx);

}  // namespace moepack::oracle
