// Per-layer reductions: parameters vLLM computes from all of a rank's experts at once, in
// process_weights_after_loading. They are not index maps of one expert's tensor (a packer's
// contract), so they live here, next to the plan that schedules them.
//
//   vllm.max_over_experts(f32)   [E] per-expert scalars -> one F32 scalar, shape []
//     vllm-project/vllm @ e9d1398d9, model_executor/layers/fused_moe/oracle/mxfp4.py,
//     `convert_gpt_oss_weight_to_mxfp4_moe_kernel_format`, EMULATION branch: static input
//     scales become `w13_input_scale.max().to(torch.float32)` (0-dim); torch's max propagates
//     NaN, so one NaN scale makes the result NaN.
//     Example: w13_input_scale [4] = {0.5, 0.75, 0.25, 0.75} -> 0.75 (bytes 00 00 40 3F).
//   vllm.max_over_experts(f32,all_experts)   the same over every expert of the layer, not only
//     the rank's: quant_utils.py `amax_for_moe_activation_quant` all-reduces the max over the EP
//     group when EPLB is on (FP8 static input scales).
//   vllm.empty_int32(0,e9d1398d9)   an I32 tensor of shape [0] for the layer (XPU WNA16's GPTQ
//     g_idx and sort indices, int_wna16.py `convert_to_wna16_moe_kernel_format` XPU branch).
// The FP8 and NVFP4 families add their own (fp8_prepare.h, nvfp4_prepare.h).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lib/core/dtype.h"
#include "lib/core/layout_ids.h"
#include "lib/core/tensor.h"

namespace moepack::convert {

// What a reduction (or a value stage) reads: the canonical params of the experts, any role,
// loaded as the plan loads them (one rank's geometry). `each` visits the rank's experts
// (whole_layer false) or every expert of the layer (true) in order, with the expert's id; the
// params are read one expert at a time, so a pass over large tensors stays bounded.
struct ReductionInput {
  std::string role;            // the output tensor's role
  uint64_t local_experts = 0;  // experts this rank holds
  uint64_t first_expert = 0;   // the id of its first
  std::function<bool(const std::string& role)> has;
  std::function<void(const std::string& role, bool whole_layer, const std::function<void(uint64_t, const OwnedTensor&)>& fn)> each;
  // Names one expert's (id's) source param in error messages ("model.layers.0.mlp.experts, expert 3, w13_weight_scale_2").
  std::function<std::string(const std::string& role, uint64_t expert)> where;
  // The layer's SwiGLU parameters (TRT-LLM NVFP4 folds them into per-expert tensors).
  std::optional<double> swiglu_limit, swiglu_beta;

  std::vector<OwnedTensor> gather(const std::string& of_role, bool whole_layer = false) const;
};

// The largest of the experts' scalar `role` (one float per expert), NaN winning as in torch.max:
// vLLM's maximum of static input scales (process_fp8_input_tensor_strategy_moe, and the a1/a2
// scale in make_fp8_moe_quant_config). Over the rank's experts, or every expert of the layer.
float max_scalar_over_experts(const ReductionInput& in, const std::string& role, bool whole_layer);

class LayerReduction {
 public:
  virtual ~LayerReduction() = default;
  virtual std::string name() const = 0;  // the manifest's layout string
  virtual DType dtype() const = 0;
  virtual std::vector<uint64_t> shape(uint64_t local_experts) const = 0;
  // `out` has exactly byte_size(dtype(), shape(in.local_experts)) bytes. Throws Error(bad_input)
  // on params it cannot reduce, naming the expert and param.
  virtual void reduce(const ReductionInput& in, std::span<uint8_t> out) const = 0;
  // True when the tensor is computed from other params (its own role need not be loaded).
  virtual bool reads_other_roles() const { return false; }
};

// nullptr when `layout_id` names no reduction (one lookup in derivation_registry's table).
const LayerReduction* find_reduction(std::string_view layout_id);
// The reductions defined here (max_over_experts, the layer's empty int32), by exact id.
const LayerReduction* find_generic_reduction(std::string_view layout_id);

// A per-element change of one expert's canonical param that needs the layer's other params
// (vLLM rewrites the values in process_weights_after_loading before or after its layout change:
// the b12x bake-in of weight_scale_2 into the block scales, Marlin NVFP4's power-of-two factor).
// The packed tensor's canonical form is the param after the stage; the manifest names the stage.
class ValueStage {
 public:
  virtual ~ValueStage() = default;
  virtual std::string name() const = 0;
  struct Prepared {
    // The change of local expert e's param.
    std::function<void(uint64_t local_expert, OwnedTensor& param)> change;
    // What the param's second-level multiplier becomes once the change is applied (the b12x
    // bake-in absorbs it: 1; Marlin's factor F divides it by F), for a reference computed from
    // the changed param.
    std::function<float(uint64_t local_expert, float multiplier)> multiplier;
  };
  // Once per rank: reads what the stage needs.
  virtual Prepared prepare(const ReductionInput& in) const = 0;
};

// nullptr when `id` names no value stage (one lookup in derivation_registry's table).
const ValueStage* find_value_stage(std::string_view id);

// A layout string of a family row may start with a value stage: "STAGE => LAYOUT".
inline constexpr std::string_view kValueStageSeparator = layout_id::kValueStageSeparator;

}  // namespace moepack::convert
