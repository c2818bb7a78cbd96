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
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lib/core/dtype.h"
#include "lib/core/tensor.h"

namespace moepack::convert {

class LayerReduction {
 public:
  virtual ~LayerReduction() = default;
  virtual std::string name() const = 0;  // the manifest's layout string
  virtual DType dtype() const = 0;
  virtual std::vector<uint64_t> shape() const = 0;
  // `experts` are the rank's experts' canonical params, in expert order; `out` has exactly
  // byte_size(dtype(), shape()) bytes. Throws Error(bad_input) on params it cannot reduce.
  virtual void reduce(std::span<const OwnedTensor> experts, std::span<uint8_t> out) const = 0;
};

// nullptr when `layout_id` names no reduction.
const LayerReduction* find_reduction(std::string_view layout_id);

}  // namespace moepack::convert
