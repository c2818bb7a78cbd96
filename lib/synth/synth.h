// Synthetic Mixture-of-Experts checkpoints of every family moepack reads, for tests, samples and
// benchmarks (checkpoint-formats.md 3.x gives names, dtypes, shapes, config keys and packing).
//
// Two kinds of output:
//  * small samples: a few experts, one or two MoE layers, kernel-plausible dims. Weights are
//    seeded random floats, really quantized with the family's scale conventions, so a
//    dequantized expert approximates `linear_source` of the same seed and key.
//  * real-shape checkpoints: the exact tensor list, names, dtypes and shapes of a released model
//    (gpt-oss-20b/120b, DeepSeek-V3, Qwen3-30B-A3B, Mixtral-8x7B) in a family's format, with an
//    all-zero sparse data region (ftruncate: no disk blocks), optionally only the first N layers.
//
// Same family, options and seed → byte-identical files on every machine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/synth/quantize.h"

namespace moepack::synth {

struct FamilyInfo {
  std::string name;     // what `moepack sample --family` takes, e.g. "ct-nvfp4"
  std::string arch;     // model layout: gpt_oss, qwen3_moe, mixtral, deepseek_v3, deepseek_v4, nemotron_h, llama4
  std::string summary;  // one line for `moepack sample --list`
};

struct ModelInfo {
  std::string name;            // e.g. "gpt-oss-120b"
  std::string arch;
  std::string default_family;  // the family the released checkpoint uses
};

const std::vector<FamilyInfo>& family_table();
std::vector<std::string> synth_families();
const std::vector<ModelInfo>& real_shape_models();

struct SampleOptions {
  uint64_t seed = 0;
  int experts = 0;        // routed experts; 0 = the default (4 for small samples, the model's for real shape)
  int layers = 0;         // small: MoE layers (default 1); real shape: leading decoder layers (default all)
  int hidden = 0;         // small samples only: 0 = the family's default
  int intermediate = 0;   // small samples only: expert width; 0 = the family's default
  int shards = 0;         // small samples only: 0 = the family's default (gpt-oss 3, DeepSeek-V3 2, else 1)
  std::string real_shape; // empty: small sample; else a name from real_shape_models()
  bool force = false;     // replace an existing output directory
  int hash_layers = 0;    // DeepSeek-V4: leading layers routed by token id (num_hash_layers, gate.tid2eid)
};

// The dimensions a sample gets (after defaults), so tests can recompute the source weights.
struct SampleDims {
  std::string arch;
  uint64_t hidden = 0, intermediate = 0;  // intermediate = expert (moe) width
  uint64_t dense_intermediate = 0;        // DeepSeek dense layers / config only elsewhere
  uint64_t experts = 0, shared_experts = 0, top_k = 0;
  uint64_t layers = 0;       // decoder layers written (num_hidden_layers)
  uint64_t first_dense = 0;  // leading dense layers (DeepSeek first_k_dense_replace)
  uint64_t vocab = 0;
  uint64_t hash_layers = 0;  // DeepSeek-V4 num_hash_layers
  bool attention = false;    // real-shape checkpoints carry attention tensors; small samples do not
  uint64_t heads = 0, kv_heads = 0, head_dim = 0;
  uint64_t q_lora_rank = 0, kv_lora_rank = 0, qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;  // MLA
};
// Throws moepack::Error (usage) for an unknown family/model, a family the model's layout cannot
// take, or dims the family cannot pack.
SampleDims sample_dims(const std::string& family, const SampleOptions& options);

// The seeded float weights [rows, cols] (nn.Linear [out, in]) behind one linear layer. Keys do
// not depend on the family, so every family of a seed quantizes the same experts:
//   expert_key(L, E, "gate"|"up"|"down")  routed expert E of decoder layer L
//   "layers.L.shared.gate" ...            DeepSeek shared expert
//   "layers.L.dense.gate" ...             DeepSeek dense MLP
// gate/up are [intermediate, hidden], down is [hidden, intermediate].
Matrix linear_source(uint64_t seed, const std::string& key, uint64_t rows, uint64_t cols);
std::string expert_key(uint64_t layer, uint64_t expert, const std::string& proj);
// gpt-oss expert biases: `key` + ".bias", n values.
std::vector<float> bias_source(uint64_t seed, const std::string& key, uint64_t n);

struct WriteReport {
  std::string dir;
  std::vector<std::string> files;  // relative names, sorted
  uint64_t tensors = 0;
  uint64_t data_bytes = 0;         // Σ tensor payload bytes (the index's total_size)
};

// Writes the checkpoint directory atomically: everything goes to OUT.tmp, which is renamed to
// OUT at the end. An existing OUT is an error unless options.force.
WriteReport write_sample(const std::string& family, const std::string& out_dir, const SampleOptions& options);

}  // namespace moepack::synth
