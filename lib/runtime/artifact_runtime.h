// Running an artifact's MoE layers from the artifact alone (docs/ARTIFACT.md "Enough to run a
// layer"): the manifest says how each layer routes and activates and what each packed tensor
// unpacks to; each rank's packed slabs go through their layout's inverse, are dequantized
// through lib/experts' format table and computed at that rank's padded sizes; tensor-parallel
// ranks' outputs are summed, expert-parallel ranks run their own experts. This is the
// emulation of every packed layout that `verify` and `run` use, on any machine.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "formats/artifact/manifest.h"
#include "formats/checkpoints/checkpoint.h"
#include "lib/experts/cpu_experts.h"
#include "lib/experts/routing.h"

namespace moepack::runtime {

struct FastCpuRank;

class ArtifactRuntime {
 public:
  // Reads ARTIFACT/moepack.json. Throws Error(bad_input) when it is not an artifact.
  explicit ArtifactRuntime(const std::string& artifact_dir);
  ~ArtifactRuntime();
  ArtifactRuntime(const ArtifactRuntime&) = delete;
  ArtifactRuntime& operator=(const ArtifactRuntime&) = delete;

  const artifact::Manifest& manifest() const;
  const std::string& manifest_path() const;
  // The index of the layer with this prefix; Error(usage) naming the prefixes when there is none.
  size_t layer_index(const std::string& prefix) const;
  // Why the runtime experts cannot run layer `i` (an old manifest, a family they do not run
  // yet); nullopt when they can.
  std::optional<std::string> cannot_run(size_t i) const;

  // Routes router logits [tokens, experts] as layer `i` does (its correction bias is read from
  // the artifact). A DeepSeek-V4 hash layer routes by `token_ids` ([tokens]) through its tid2eid
  // table and throws Error(bad_input) without them.
  experts::Routing route(size_t i, const std::vector<float>& logits, uint64_t tokens, const std::vector<int64_t>* token_ids = nullptr);
  // The rows of layer `i`'s tid2eid table (the token ids it takes); 0 when it routes by logits.
  uint64_t hash_vocab(size_t i) const;
  // A routing given by the caller instead of the router (`moepack run` with topk_ids and
  // topk_weights): `ids` and `weights` are [tokens, k]. Throws Error(bad_input), naming `where`
  // and `ids_name`/`weights_name`, when the sizes disagree, k is 0 or above the layer's experts,
  // an id is negative, not below the number of experts or repeated within a token, or a weight
  // is not finite.
  experts::Routing routing_from(size_t i, const std::vector<int64_t>& ids, const std::vector<float>& weights, uint64_t tokens, uint64_t k,
                                const std::string& where, const std::string& ids_name, const std::string& weights_name) const;
  // The layer's output [tokens, hidden] for hidden states [tokens, hidden], the same bits for any
  // `threads` (the routed experts are unpacked and run in parallel). Throws Error(bad_input)
  // when `routing` does not fit the layer (its token count, its sizes, an expert id not below
  // the number of experts).
  std::vector<float> run(size_t i, const std::vector<float>& x, const experts::Routing& routing, uint64_t tokens, int threads = 1);

  // The packed CPU layout of layer `i` when the fast CPU experts read it directly
  // (lib/experts/cpu_experts.h: the cpu-amx MXFP4, BF16, FP8 block, INT8 W8A8 and INT4 W4A16 artifacts,
  // the BF16 vec prepack of cpu-avx512);
  // nullopt for every other layer.
  std::optional<experts::CpuLayout> fast_cpu_layout(size_t i) const;
  bool has_fast_cpu(size_t i) const;
  // The same output from the fast CPU experts, reading the packed bytes in place (mapped).
  // Throws Error(bad_input) when a tensor's bytes do not match the layout at the layer's sizes.
  std::vector<float> run_fast_cpu(size_t i, const std::vector<float>& x, const experts::Routing& routing, uint64_t tokens,
                                  const experts::CpuExpertsOptions& options = {});
  // Forgets what running layer `i` kept (its fast CPU pointers and bias copies) and unmaps the
  // pages of its tensors this process touched, so a pass over every layer of a large model
  // (verify) holds one layer's pages at a time. Running the layer again reads them again.
  void release_layer(size_t i);
  // Packed bytes of the experts layer `i` routes to (what a forward pass reads), for benchmarks.
  uint64_t routed_weight_bytes(size_t i, const experts::Routing& routing) const;

 private:
  const std::vector<FastCpuRank>& fast_cpu_layer(size_t i);
  const std::pair<uint64_t, std::vector<int64_t>>* hash_table(size_t i) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The reference: the same layer computed from the source checkpoint's canonical params at their
// real sizes (no padding, no rank slicing), with the artifact layer's routing and activation.
// `target_dtype` is the manifest target's "dtype" (the params dtype vLLM loads float scales into).
// The routed experts are read and run on `threads` threads; the result is the same bits for any.
std::vector<float> run_reference(const ckpt::Checkpoint& source, const std::string& source_path, const artifact::Layer& layer,
                                 const std::vector<float>& x, const experts::Routing& routing, uint64_t tokens, const std::string& target_dtype,
                                 int threads = 1);

}  // namespace moepack::runtime
