// The streaming half of `convert`: given a fully planned conversion (every output tensor with
// its size, layout and a function that produces one expert's packed slab), write the artifact
// of docs/ARTIFACT.md. Planning (which backend, which layout, which bytes) happens before, in
// lib/convert/plan; nothing here knows about checkpoint families or backends.
//
// Memory: at most `batch` expert slabs of one tensor are alive at once (batch = 2 x threads),
// plus one copy chunk for pass-through tensors, whatever the checkpoint size.
// Determinism: slabs are produced in parallel but written in expert order, so the bytes do not
// depend on the thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/artifact/manifest.h"
#include "formats/safetensors/file.h"
#include "lib/core/dtype.h"

namespace moepack::convert {

// One packed output tensor: [num_experts, ...] made of equal per-expert slabs.
struct PackedTensorPlan {
  std::string role;         // vLLM FusedMoE parameter name: w13_weight, w2_weight_scale, ...
  std::string name;         // PREFIX.ROLE
  DType dtype = DType::U8;
  std::vector<uint64_t> shape;  // full storage shape, experts first
  std::string layout;       // manifest layout string
  uint64_t num_experts = 0;
  uint64_t slab_bytes = 0;  // bytes of one expert's slab
  // What unpacking one slab gives back (the manifest's `canonical`), and for reductions how the
  // single "slab" was derived.
  DType canonical_dtype = DType::U8;
  std::vector<uint64_t> canonical_shape;
  bool per_expert = true;
  std::string derived;
  std::string value_stage;  // the value change before the layout (reductions.h ValueStage), if any
  // Fills one expert's slab (exactly slab_bytes). Called concurrently for different experts.
  std::function<void(uint64_t expert, std::span<uint8_t> slab)> produce;
};

// The manifest entry of a planned tensor: everything but the `file` and `xxh3` writing gives it.
artifact::PackedTensor manifest_entry(const PackedTensorPlan& t);

struct RankPlan {
  int rank = 0;
  std::vector<PackedTensorPlan> tensors;
};

struct LayerPlan {
  artifact::Layer manifest;  // everything but `ranks`, which the executor fills
  std::vector<RankPlan> ranks;
};

struct PassThroughTensor {
  std::string name;
  st::TensorRef source;
};

struct ConversionPlan {
  std::string source_root;
  std::string source_scheme;              // Checkpoint::scheme_id
  std::string source_scheme_description;  // Checkpoint::scheme
  // A source named by model id (ckpt::locate_checkpoint): the id, revision and commit the
  // manifest records; empty for a path.
  std::string source_model_id;
  std::string source_revision;
  std::string source_commit;
  std::vector<std::string> source_files;       // absolute/relative paths of the shards read
  std::vector<const st::File*> source_mappings; // their mappings, whose pages are released after each packed tensor
  std::vector<std::string> copied_files;       // other files, relative to source_root, copied byte for byte
  std::vector<PassThroughTensor> pass_through; // non-expert tensors, copied unchanged
  std::vector<LayerPlan> layers;
  nlohmann::ordered_json target = nlohmann::ordered_json::object();
  int tp_size = 1;
};

struct ExecutorOptions {
  int threads = 0;                      // 0: the CPUs this process may use (lib/core/cpus.h)
  uint64_t max_shard_bytes = 5'000'000'000;
  bool show_progress = false;
};

// One output file and the tensors it holds, in write order.
struct ShardAssignment {
  std::string file_name;
  int rank = -1;                        // -1: rank-independent tensors
  std::vector<std::string> tensor_names;
  uint64_t data_bytes = 0;
};

inline constexpr const char* kIndexFileName = "model.safetensors.index.json";

// With several ranks (tensor or expert parallelism), rank R's packed tensors are in
// model-rankR*.safetensors and its complete view, a standard index of every tensor that rank
// loads (the shared files and its own), is model-rankR.safetensors.index.json beside them:
// huggingface_hub's `model{suffix}.safetensors` pattern with prefix "model-rankR", so its
// loaders read it with filename_pattern="model-rankR{suffix}.safetensors". Every file stays in
// the artifact directory: huggingface_hub refuses index entries with ".." and vLLM's index
// filter fails on them, and one directory is what a TP deployment has (every worker gets the
// same model path and picks its files by rank).
std::string rank_index_file_name(int rank);

// How the plan's tensors are spread over files (also what --dry-run prints).
std::vector<ShardAssignment> assign_shards(const ConversionPlan& plan, uint64_t max_shard_bytes);

// Writes the artifact into `staging_dir` (which the caller commits); returns the manifest.
artifact::Manifest execute_plan(const ConversionPlan& plan, const std::string& staging_dir, const ExecutorOptions& options);

// One of several artifacts of the same source (convert --target A,B,C).
struct PlannedArtifact {
  const ConversionPlan* plan = nullptr;
  std::string staging_dir;
  std::string label;  // names the artifact in the progress line ("sm90"); empty for one artifact
};

// Writes several artifacts of one source in one pass over it: the artifacts advance tensor by
// tensor in module-path order, so each source tensor is read from disk once and packed for every
// artifact while its pages are cached; one hash of the source serves every manifest. Each
// artifact's bytes are those execute_plan writes for its plan alone, and memory is bounded as
// for one (one tensor's pipeline at a time). Returns the manifests in the order given.
std::vector<artifact::Manifest> execute_plans(const std::vector<PlannedArtifact>& artifacts, const ExecutorOptions& options);

}  // namespace moepack::convert
