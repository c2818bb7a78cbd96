// What vLLM's FusedMoE loader does with one expert's checkpoint tensors before any kernel
// transform: slice them for a tensor-parallel rank and copy them into zero-filled parameters
// allocated at the backend's padded sizes. The packers start from the result.
//
// Two loaders exist at the reference (vllm e9d1398d9):
//  * gpt-oss (vllm/model_executor/models/gpt_oss.py): w13 rows are interleaved gate/up, so a
//    rank takes one contiguous row block [2*start, 2*end) with start = rank*per_rank,
//    end = min(start+per_rank, I); w2 takes the matching columns; the w2 bias is loaded on rank 0
//    only (zeros elsewhere). The MXFP4 loaders (`_load_weights_mxfp4`, and `_load_weights_quark`
//    for MXFP4 weights) keep whole 32-element scale blocks: per_rank = ceil((I/32)/tp)*32; the
//    others (`_load_weights_other` for BF16 and compressed-tensors, `_load_weights_quark` for
//    the rest) take per_rank = ceil(I/tp).
//  * everything else (FusedMoE._load_w13/_load_w2 in fused_moe/routed_experts.py): gate and up
//    are separate shards; each is narrowed along its sharded dim with size floor(n/tp) at offset
//    rank*floor(n/tp) (clipped at the end), and copied to the start of its half of the padded
//    w13 parameter (gate at row 0, up at row P, P = padded per-rank intermediate); w2 is narrowed
//    along its input dim the same way. Padding is always at the end of each dim.
// The slicing counts in storage units of each tensor (FP4 bytes, scale groups), exactly as vLLM
// does, even where that splits a quantization block.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "formats/artifact/manifest.h"
#include "formats/checkpoints/checkpoint.h"
#include "lib/convert/reductions.h"
#include "lib/core/tensor.h"

namespace moepack::convert {

struct RankGeometry {
  uint64_t hidden = 0;                    // H, unpadded
  uint64_t intermediate = 0;              // I, full (all ranks), unpadded
  uint64_t padded_hidden = 0;             // Hp, the backend's round-up
  uint64_t padded_intermediate = 0;       // P, per rank after the backend's round-up
  uint64_t tp_size = 1;
  uint64_t tp_rank = 0;
  bool gpt_oss_interleaved = false;       // the gpt-oss loader (interleaved w13 rows)
  bool gpt_oss_mx_blocks = false;         // ... its MXFP4 variant: ranks take whole 32-element blocks
  bool w2_bias_first_rank_only = false;   // gpt-oss' loaders: w2_bias zero on TP ranks > 0
  bool gated = true;                      // false: w13 holds only the up projection (I rows, padded to P)
  bool int_transposed = false;            // WNA16 (GPTQ/AWQ/compressed-tensors) params: lib/convert/wna16_marlin.h
  // WNA16 act-order (GPTQ desc_act, compressed-tensors actorder "group"): vLLM loads the w2 group
  // scales (and GPTQ's w2 qzeros) whole on every rank (`load_full_w2`), since g_idx names groups
  // of the full intermediate dimension.
  bool wna16_full_w2 = false;
  // WNA16 group size along K (-1 channel-wise) and whether the method is compressed-tensors'
  // (whose create_weights raises on group scales that do not divide the rank's sizes).
  int64_t wna16_group_size = 0;
  bool wna16_compressed_tensors = false;
  // MoeWNA16 (--quantization moe_wna16): its loader repeats every scale and zero-point group this
  // many times (group_size_div_factor) before taking the rank's slice; 1 for every other method.
  uint64_t wna16_group_repeat = 1;
  // The model dtype (--dtype): float scales are copied into parameters of this dtype.
  DType params_dtype = DType::BF16;
  // FP8 (fp8 / compressed-tensors / ModelOpt W8A8): scales load into fp32 parameters, sliced as
  // lib/convert/fp8_prepare.h says; block-quantized layers give their weight_block_size.
  bool fp8_scales = false;
  uint64_t fp8_block_n = 0, fp8_block_k = 0;
  // MI300-class devices (E4M3FNUZ): the FP8 methods that normalize (Fp8MoEMethod, compressed-
  // tensors and Quark W8A8 FP8; normalize_e4m3fn_to_e4m3fnuz) hold the weights as F8_E4M3FNUZ,
  // byte 0x80 (E4M3FN's -0, FNUZ's NaN) made 0x00, and every weight and input scale doubled
  // (the same bits are worth half as much in FNUZ). Needs fp8_scales.
  bool fp8_fnuz = false;
};


// The per-rank row range [begin, end) of the intermediate dimension the gpt-oss loader takes
// (empty on the ranks past the end).
struct IntermediateRange {
  uint64_t begin = 0;
  uint64_t end = 0;
};
IntermediateRange gpt_oss_rank_range(const RankGeometry& g);

// Copies `count` elements of `element_bytes` bytes from src element `src_at` to dst element
// `dst_at`: the loaders' one copy. A range outside either tensor is a planning bug (a rank range
// the parameter was not sized for) and an internal error naming `role`, never a write past a buffer.
void copy_param_elements(const OwnedTensor& src, uint64_t src_at, OwnedTensor& dst, uint64_t dst_at, uint64_t count, uint64_t element_bytes,
                         const std::string& role);

// Loads one expert's canonical tensor `role` (w13_weight, w13_weight_scale, w2_weight,
// w2_weight_scale, w13_bias, w2_bias, or a per-expert scalar) into its padded per-rank parameter.
// 2-D tensors are [rows, cols] in storage units: w13 rows = 2I, w2 rows = H; cols count the
// input dim in storage units (e.g. H/2 FP4 bytes, H/32 E8M0 groups), scaled to the padded size.
OwnedTensor load_expert_param(const std::string& role, const OwnedTensor& canonical, const RankGeometry& g);
// The same, taking the canonical tensor: where loading changes nothing (one rank, no padding,
// not WNA16, not an FP8 / INT8 scale) the parameter is the canonical tensor itself, moved.
OwnedTensor load_expert_param(const std::string& role, OwnedTensor&& canonical, const RankGeometry& g);

// ---- What the planner, the artifact check and the reference share about loading a layer ----

// Whether vLLM loads this layer with one of gpt-oss' MXFP4 loaders (interleaved w13 rows, ranks
// taking whole 32-element blocks; see the top of this file) rather than its other loaders.
bool uses_gpt_oss_mx_block_loader(const ckpt::MoeLayer& layer, const std::string& family);

// The family-specific facts of one rank's loader geometry (WNA16's transposed params and params
// dtype, FP8's fp32 scales and blocks, gpt-oss' rank ranges), shared by the planner, the
// integrity check and the reference. `family` is the oracle family's name ("wna16", "fp8", ...).
// `fp8_fnuz_device`: the target holds FP8 as E4M3FNUZ (an FP8 layer then loads normalized).
void set_family_geometry(RankGeometry& g, const ckpt::MoeLayer& layer, const std::string& family, DType params_dtype, bool fp8_fnuz_device);

// Whether an artifact's layer holds FNUZ weights (its canonical FP8 params are F8_E4M3FNUZ): the
// integrity check and the reference load the source the same way.
bool holds_fp8_fnuz(const artifact::Layer& layer);

// The loaded param an output role reads: the role itself, or the compressed-tensors name vLLM
// renames to it after loading (w13_weight_packed for w13_weight, ...); "" when the layer has neither.
std::string loaded_param_name(const std::set<std::string>& available, const std::string& role);

// The loaded param an artifact role is read from: the role itself, or the compressed-tensors
// name vLLM renames to it while loading (w13_weight_packed for w13_weight, ...).
std::string source_param_of(const ckpt::MoeLayer& layer, const std::string& role);

// The model's SwiGLU parameters some reductions fold in (from the oracle query, or the manifest).
struct SwigluFacts {
  std::optional<double> limit, beta;
};

// What a reduction or value stage of `role` reads, for the rank holding experts
// [first_expert, first_expert + local_experts) (planning and verification share it).
ReductionInput reduction_input(const ckpt::Checkpoint& checkpoint, const ckpt::MoeLayer& layer, const std::string& role, const RankGeometry& g,
                               uint64_t first_expert, uint64_t local_experts, const SwigluFacts& swiglu);

}  // namespace moepack::convert
