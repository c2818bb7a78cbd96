// `moepack diff A B`: two artifacts, two checkpoints, or one of each, compared tensor by tensor
// (moepack-diff(1)).
//
//   A or B          a directory with moepack.json is an artifact: its tensors are those of the
//                   safetensors files its manifest lists, a packed tensor of a rank file keyed
//                   NAME@rankR when the layer has several ranks (the same name is in every rank's
//                   file); any other directory or .safetensors file is a checkpoint, read as
//                   vLLM reads it (st::ShardSet), keyed by name.
//   tensors         matched by key: only in A, only in B, and for each pair the dtype, the shape,
//                   the bytes (count and first differing offset) and, for float dtypes, the
//                   values (st::compare_tensors), in bounded chunks.
//   manifests       two artifacts: every field of the manifests, layers matched by prefix, ranks
//                   by rank, files by name; each difference as a path such as
//                   layers[model.layers.0.mlp.experts].ranks[0].tensors.w13_weight.layout.
//   other files     two directories: the top-level files that are not safetensors nor
//                   moepack.json (config.json, index files, tokenizer files), byte for byte.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/safetensors/compare.h"

namespace moepack::artifact {

struct DiffSide {
  std::string path;
  std::string kind;  // "artifact" or "checkpoint"
  uint64_t safetensors_files = 0;
  uint64_t tensors = 0;
};

struct DiffTensor {
  std::string file;  // file name, relative to the side's directory
  std::string dtype;
  std::vector<uint64_t> shape;
};

struct OneSidedTensor {
  std::string key;
  DiffTensor tensor;
};

struct TensorDifference {
  std::string key;
  DiffTensor a, b;
  st::TensorComparison comparison;
};

// A manifest field that differs; an absent side is nullopt.
struct ManifestDifference {
  std::string path;
  std::optional<nlohmann::ordered_json> a, b;
};

struct FileDifference {
  std::string name;
  uint64_t a_bytes = 0, b_bytes = 0;
  uint64_t first_diff_byte = 0;  // the shorter size when one file is a prefix of the other
};

struct DiffReport {
  DiffSide a, b;
  uint64_t tensors_compared = 0, tensors_identical = 0;
  std::vector<OneSidedTensor> only_in_a, only_in_b;  // sorted by key
  std::vector<TensorDifference> different;           // sorted by key
  bool manifests_compared = false;
  std::vector<ManifestDifference> manifest;
  std::vector<std::string> files_only_in_a, files_only_in_b;
  std::vector<FileDifference> files_different;
  bool identical() const;
};

// Throws Error(bad_input) for a path that is neither, a malformed safetensors file or manifest,
// Error(io) for a file that cannot be read.
DiffReport diff(const std::string& a, const std::string& b);

}  // namespace moepack::artifact
