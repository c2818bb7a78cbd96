// What the storage files share: the name of each expert naming (for their messages) and the
// checked read of one expert's slice of a fused tensor. It calls nothing in the storages or the
// reader, so they stand on it without a circle.
#include "formats/checkpoints/expert_storage.h"

namespace moepack::ckpt {

std::string_view naming_name(ExpertNaming n) {
  switch (n) {
    case ExpertNaming::hf: return "per-expert gate_proj/up_proj/down_proj";
    case ExpertNaming::mixtral: return "per-expert w1/w3/w2 (Mixtral)";
    case ExpertNaming::deepseek_native: return "per-expert w1/w3/w2 (DeepSeek native)";
    case ExpertNaming::hf_no_gate: return "per-expert up_proj/down_proj (non-gated)";
    case ExpertNaming::per_expert_gate_up: return "per-expert gate_up_proj/down_proj (gate/up fused)";
    case ExpertNaming::gpt_oss_fused: return "fused gate_up_proj/down_proj (gpt-oss)";
    case ExpertNaming::fused_3d: return "fused 3-D gate_up_proj/down_proj";
  }
  return "";
}

namespace detail {

std::vector<uint8_t> read_expert_slice(const st::TensorRef& tensor, uint64_t expert, uint64_t num_experts) {
  const uint64_t per_expert = tensor.info->num_bytes() / num_experts;
  std::vector<uint8_t> slice(static_cast<size_t>(per_expert));
  tensor.read(expert * per_expert, slice);
  return slice;
}

}  // namespace detail
}  // namespace moepack::ckpt
