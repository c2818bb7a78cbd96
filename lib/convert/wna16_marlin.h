// The integer weight-only (WNA16) side of the converter that is not a fixed index map of one
// tensor: how vLLM's GPTQ / AWQ / compressed-tensors MoE methods load their "transposed"
// parameters, and the per-expert outputs computed from several of an expert's parameters.
//
// Loading (vllm-project/vllm @ e9d1398d9, FusedMoE weight loader with is_transposed=True, then
// fused_moe/oracle/int_wna16.py `_pad_w13_shard_cols` / `_pad_rows`): every w13 tensor holds
// the output dimension in its columns (gate half then up half, in storage units: N for scales,
// N/pf for AWQ qweight and all qzeros), every w2 tensor the intermediate (input) dimension in
// its rows. A tensor-parallel rank takes floor(n/tp) units of each half (w13) or of the rows
// (w2), then each w13 half is zero-padded to the padded intermediate size and w2 rows to it
// (marlin_moe_padded_intermediate). w13 g_idx [H] is kept whole, w2 g_idx [I] is sliced;
// channel-wise w2 scales and zero points ([1, H]) are kept whole.
//
// Derivations (layout ids, as family_wna16.cpp names them):
//   vllm.marlin_act_order_rows(perm=sort_indices,e9d1398d9) | <weight layout>
//       act-order weight: the K rows of codes gathered by the stable argsort of the expert's
//       g_idx (ERRATA 5: gptq_marlin_repack takes the perm), then the registered Marlin repack.
//   vllm.marlin_sort_g_idx(sorted_g_idx,stable,e9d1398d9)   g_idx[argsort(g_idx)]      I32 [K]
//   vllm.marlin_sort_g_idx(sort_indices,stable,e9d1398d9)   argsort(g_idx) as int32    I32 [K]
//   vllm.empty_int32(E,0,e9d1398d9)                         vLLM's [E, 0] placeholders I32 [0]
// vLLM calls torch.argsort (not stable on CUDA); any sort of g_idx is valid for the kernel, and
// the stable one is the reproducible choice (layouts-marlin-vnni-e8m0.md 2.3).
// A g_idx element outside [0, groups) is bad input (exit 4), named by tensor, expert and element.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "formats/artifact/manifest.h"
#include "formats/checkpoints/checkpoint.h"
#include "lib/convert/derivations.h"
#include "lib/convert/executor.h"
#include "lib/convert/param_loader.h"
#include "lib/core/tensor.h"

namespace moepack::convert {

// Whether vLLM loads the w2 group scales whole for this quantization (load_full_w2): GPTQ
// desc_act and compressed-tensors actorder "group", with group scales.
bool wna16_loads_full_w2(const ckpt::LayerQuant& q);

// Sets the WNA16 facts of a rank geometry (int_transposed, wna16_full_w2, params_dtype) for a
// layer of family wna16; the planner, the integrity check and the reference share it.
void set_wna16_geometry(RankGeometry& g, const ckpt::MoeLayer& layer, DType params_dtype);

// MoeWNA16 (--quantization moe_wna16): sets RankGeometry::wna16_group_repeat from the rank's
// sizes (oracle::moe_wna16_group_size_div_factor); Error(refused) where create_weights raises.
// Needs the geometry's hidden, intermediate, tp_size and wna16_group_size.
void set_moe_wna16_geometry(RankGeometry& g);
// Whether an artifact's layer was converted for MoeWNA16 (its scales carry MoeWNA16's layout).
bool holds_moe_wna16_scales(const artifact::Layer& layer);

// The params dtype an artifact was converted for, from its manifest's target "dtype" ("bf16",
// "fp16", "fp32"; anything else is bad input naming `where`).
DType params_dtype_of_target(const std::string& target_dtype, const std::string& where);

// load_expert_param for a WNA16 parameter (RankGeometry::int_transposed).
OwnedTensor load_wna16_param(const std::string& role, const OwnedTensor& canonical, const RankGeometry& g);

// The WNA16 derivations (make_expert_derivation's share, lib/convert/derivations.h): nullptr when
// `layout_id` is none of them. `available` are the layer's canonical params.
std::shared_ptr<const ExpertDerivation> make_wna16_derivation(const std::string& role, const std::string& layout_id,
                                                              const std::set<std::string>& available, const ckpt::MoeLayer& layer);
// What a WNA16 derived layout id is when read back; kind none for other ids.
DerivedLayout wna16_derived_layout(const std::string& layout_id);

// Stable argsort of a g_idx, checking every element against [0, groups).
std::vector<int32_t> stable_g_idx_order(std::span<const int32_t> g_idx, int64_t groups, const std::string& what);

// Undoes the act-order gather on one expert's unpacked params (keyed by role) of one projection
// (`proj`: "w13_" or "w2_"): where PROJg_idx_sort_indices is non-empty, the weight's K rows go back to their checkpoint order
// (row perm[j] takes gathered row j) and the sorted g_idx back to g_idx[perm[j]]. The result is
// the loaded checkpoint's params, which dequantize as the source does. Error(bad_input) naming
// `where` when the indices are no permutation or the shapes disagree.
void restore_act_order(std::map<std::string, OwnedTensor>& params, const std::string& proj, const std::string& where);

}  // namespace moepack::convert
