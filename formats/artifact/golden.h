// Golden files: what `moepack verify --write-golden F` pins and `verify --golden F` compares
// against in CI — the runtime experts' outputs for a seeded input, and the XXH3-128 of every
// packed tensor of the artifact that produced them.
//
// On disk, one zstd frame (with its content checksum) whose content is a safetensors file, so
// the strict reader of formats/safetensors validates the inside:
//
//   zstd frame ─► safetensors
//                  ├─ __metadata__ (strings only, as safetensors requires)
//                  │    "format"          "moepack-golden/1"
//                  │    "moepack_version" "0.1.0"
//                  │    "reference"       "vllm e9d1398d9 (2026-08-22); ..."
//                  │    "artifact"        XXH3-128 of the artifact's moepack.json (32 hex digits)
//                  │    "seed", "tokens"  decimal integers
//                  │    "tensor_hashes"   JSON object {packed tensor name: 32 hex digits}
//                  └─ tensors: the pinned outputs, e.g. "model.layers.0.mlp.experts.output" F32 [tokens, hidden]
//
// The reader takes bytes from strangers: the decompressed size is bounded before anything is
// allocated for it (a frame that declares more, or a stream that inflates past the bound, is
// refused), exactly one frame is accepted, and every metadata field is checked.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "lib/core/dtype.h"

namespace moepack::artifact {

inline constexpr const char* kGoldenFormat = "moepack-golden/1";
inline constexpr uint64_t kDefaultMaxGoldenBytes = uint64_t{1} << 30;  // decompressed

struct GoldenTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<uint64_t> shape;
  std::vector<uint8_t> bytes;
  bool operator==(const GoldenTensor&) const = default;
};

struct Golden {
  std::string moepack_version;
  std::string reference;
  std::string artifact;  // XXH3-128 of moepack.json, 32 hex digits
  uint64_t seed = 0;
  uint64_t tokens = 0;
  std::map<std::string, std::string> tensor_hashes;  // packed tensor name -> XXH3-128 hex
  std::vector<GoldenTensor> outputs;                 // in the file's order (sorted like the reference writer)
  bool operator==(const Golden&) const = default;
};

// The zstd frame for `golden` (outputs are written in the reference writer's order). Throws
// Error(usage) for contents no reader would accept (bad hash text, duplicate or bad tensors).
std::vector<uint8_t> encode_golden(const Golden& golden);

// Reads a golden file's bytes; `path` names it in errors (Error(bad_input), exit 4).
Golden decode_golden(std::span<const uint8_t> bytes, const std::string& path, uint64_t max_decompressed = kDefaultMaxGoldenBytes);

// Atomic write (PATH.partial, fsync, rename) and a bounded read of a file.
void write_golden(const std::string& path, const Golden& golden);
Golden read_golden(const std::string& path, uint64_t max_decompressed = kDefaultMaxGoldenBytes);

}  // namespace moepack::artifact
