// How one MoE layer's experts lie in the shards, whatever the family: one tensor per expert and
// projection (per_expert_storage.cpp), gpt-oss' fused MXFP4 blocks (gpt_oss_fused_storage.cpp) or
// fused 3-D input-major tensors (fused_3d_storage.cpp). The layer's naming, found from its tensor
// names alone, picks the storage (`expert_storage`); the storage checks the layer's tensors
// against config.json and the family's recipe, and reads one expert's canonical params.
//
// checkpoint.cpp (discovery, open, read) knows the storages only through this header and names
// them in one table, `expert_storage`; the storage files use nothing of checkpoint.cpp but the
// types of checkpoint.h, and share the helpers below (expert_storage.cpp). A new storage shape is
// its file and its row in the table.
#pragma once

#include <cstdint>
#include <set>
#include <string_view>
#include <vector>

#include "formats/checkpoints/checkpoint.h"

namespace moepack::ckpt::detail {

// An expert tensor's name as layer discovery splits it: `<prefix>.<E>.<proj>.<param>`, or for a
// fused layer `<prefix>.<proj><param>` (`param` keeps its "_", as in "_blocks"). Views point into
// the tensor name, owned by the parsed header, so discovery allocates nothing per tensor.
struct ExpertTensorName {
  std::string_view prefix;  // up to and including "experts"
  bool fused = false;       // every expert in one tensor: no expert index
  uint64_t expert = 0;
  std::string_view proj;
  std::string_view param;
};

struct ScannedTensor {
  ExpertTensorName parsed;
  const st::TensorInfo* info;
  const st::File* file;
};

// Every expert tensor of one layer, in shard order, and what their names say about the layer.
struct LayerScan {
  std::vector<ScannedTensor> tensors;
  bool fused = false;
  bool per_expert = false;
  std::set<std::string_view> projs;
  uint64_t max_expert = 0;  // of the per-expert tensors
};

class ExpertStorage {
 public:
  virtual ~ExpertStorage() = default;
  // Checks every tensor of the layer against the config sizes in `layer` and its quant and
  // recipe; sets num_experts, has_bias and the summary of one expert's params.
  virtual void validate(const st::ShardSet& shards, const LayerScan& scan, MoeLayer& layer, const ModelFacts& facts) const = 0;
  // One expert's canonical params (read_expert_params in checkpoint.h), of a validated layer.
  virtual ExpertParams read(const st::ShardSet& shards, const MoeLayer& layer, uint64_t expert, std::string_view only_param) const = 0;
};

// The storage that reads layers of this naming (checkpoint.cpp, beside the rule that tells the
// naming from the tensor names).
const ExpertStorage& expert_storage(ExpertNaming naming);

const ExpertStorage& per_expert_storage();
const ExpertStorage& gpt_oss_fused_storage();
const ExpertStorage& fused_3d_storage();

// Expert `expert`'s bytes of a tensor that stacks `num_experts` experts in dim 0: a checked read,
// not a view into the mapping, so a shard truncated while we run is an I/O error naming it.
std::vector<uint8_t> read_expert_slice(const st::TensorRef& tensor, uint64_t expert, uint64_t num_experts);

}  // namespace moepack::ckpt::detail
