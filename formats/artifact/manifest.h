// The artifact manifest `moepack.json` (docs/ARTIFACT.md): what was converted, for
// which deployment, where every packed tensor lives, its layout and its XXH3-128 hash, and the
// hash of every file of the artifact. Written by the converter, read back by verify/diff and by
// scripts. The reader is strict: it is the entry point for artifacts someone else produced.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace moepack::artifact {

inline constexpr const char* kManifestFormat = "moepack/1";
inline constexpr const char* kManifestFileName = "moepack.json";
// The reference point every packed layout follows (docs/ARTIFACT.md); recorded as `reference`.
inline constexpr const char* kReferencePoint = "vllm e9d1398d9 (2026-08-22); triton_kernels v3.5.1; flashinfer 0.6.17";
// The one value of Layer::intermediate_size_scope: the sizes are what one rank holds.
inline constexpr const char* kPerRankScope = "per_rank";

struct PackedTensor {
  std::string file;    // safetensors file name, relative to the artifact directory
  std::string name;    // tensor name inside it
  std::string dtype;   // safetensors dtype name
  std::vector<uint64_t> shape;
  std::string layout;  // transform and parameters, e.g. "triton_kernels.HopperMXValue(mx_axis=1,v3.5.1)"
  std::string xxh3;    // XXH3-128 of the tensor bytes, 32 hex digits
  // What the layout's unpack returns for one expert: vLLM's loaded parameter of one expert at
  // this rank's padded sizes (docs/ARTIFACT.md "Enough to run a layer"). Empty dtype: not recorded
  // (a manifest written before these fields existed).
  std::string canonical_dtype;
  std::vector<uint64_t> canonical_shape;
  // False for a tensor that is not the concatenation of per-expert slabs (a per-layer
  // reduction such as the maximum of the experts' input scales); `derived` says how it was made.
  bool per_expert = true;
  std::string derived;
  // A value change vLLM applies to each expert's param before the layout (the NVFP4 b12x
  // bake-in, Marlin's power-of-two factor): the canonical form is the param after it. Empty: none.
  std::string value_stage;
};

struct RankTensors {
  int rank = 0;
  std::map<std::string, PackedTensor> tensors;  // ROLE (w13_weight, ...) -> tensor
};

// How the layer routes tokens (vLLM RoutingMethodType and its parameters).
struct RoutingFacts {
  std::string method;         // "RenormalizeNaive", "DeepSeekV3", "Llama4", ...
  std::string scoring_func;   // "softmax", "sigmoid", "sqrtsoftplus"
  bool renormalize = false;
  uint64_t n_group = 0;
  uint64_t topk_group = 0;
  std::optional<double> routed_scaling_factor;
  std::optional<std::string> correction_bias;  // name of the e_score_correction_bias tensor in the artifact
  // DeepSeek-V4 hash layers: name of the gate's tid2eid table [vocab, top_k] in the artifact; the
  // experts then come from each token's id (written only for such layers).
  std::optional<std::string> hash_table;
};

struct Layer {
  std::string prefix;
  std::string family;
  std::optional<std::string> weight_key;
  std::optional<std::string> activation_key;
  std::string backend;
  std::string experts_class;
  uint64_t num_experts = 0;
  uint64_t top_k = 0;
  std::string activation;
  uint64_t hidden_size = 0;
  uint64_t intermediate_size = 0;
  uint64_t padded_hidden_size = 0;
  uint64_t padded_intermediate_size = 0;
  // "per_rank" when the deployment has several ranks: intermediate_size and
  // padded_intermediate_size are then one rank's slice (the whole size divided by
  // target.moe_tp_size; under expert parallelism the whole size), as in `plan --json`. Absent
  // with one rank, where per rank and whole are the same; it is not written there, so that
  // single-rank manifests keep the bytes they had before the key existed.
  std::optional<std::string> intermediate_size_scope;
  // The facts a runtime needs to run the layer from the artifact alone (docs/ARTIFACT.md). Optional
  // when reading: manifests written before they existed do not have them (`routing` empty).
  std::optional<RoutingFacts> routing;
  std::optional<double> swiglu_limit, swiglu_alpha, swiglu_beta;
  bool has_bias = false;
  std::string w13_rows;  // "gate_up_halves", "interleaved", "up_gate_halves" (of the canonical w13)
  bool gated = true;
  std::vector<RankTensors> ranks;
};

struct FileEntry {
  std::string name;
  uint64_t bytes = 0;
  std::string xxh3;
};

struct Manifest {
  std::string format = kManifestFormat;
  std::string moepack_version;
  std::string reference;
  std::string source_scheme;              // stable id for scripts ("gpt-oss-mxfp4", "quark-w_mxfp4_a_fp8", ...)
  std::string source_scheme_description;  // the same for people ("mxfp4 (gpt-oss)")
  std::string source_fingerprint;          // "xxh3-128:<hex>" over the source files' names and hashes
  std::vector<FileEntry> source_files;
  nlohmann::ordered_json target = nlohmann::ordered_json::object();  // the deployment, as docs/CLI.md's plan --json "target"
  std::vector<Layer> layers;
  std::vector<FileEntry> files;            // every file of the artifact except moepack.json itself
};

nlohmann::ordered_json to_json(const Manifest& m);
// Validates the structure (types, required keys, hex hashes, relative file names without "..");
// throws Error(bad_input) naming `path` and the offending key.
Manifest manifest_from_json(const nlohmann::json& j, const std::string& path);
Manifest read_manifest(const std::string& path);
// Pretty JSON with a trailing newline; deterministic (keys in the order of docs/ARTIFACT.md).
std::string manifest_text(const Manifest& m);

}  // namespace moepack::artifact
