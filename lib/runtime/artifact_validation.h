// An artifact is untrusted input: it may have been made elsewhere, copied, edited or damaged. Its
// manifest is checked against itself and against the files it names before anything reads a
// tensor or sizes a buffer from one of its numbers, so a lying manifest is refused with
// Error(bad_input) (exit 4) naming the field (`$.layers[0].hidden_size`) and what the file or the
// rest of the manifest says instead. `verify`, `run`, `bench` and the integrity check all start
// here (docs/ARTIFACT.md "Reading an artifact you did not write").
#pragma once

#include <string>

#include "formats/artifact/manifest.h"
#include "formats/checkpoints/checkpoint.h"

namespace moepack::runtime {

// Bounds no real model comes near; each keeps a loop or an allocation from following a number
// the files do not back. The tensor shapes themselves are bounded by the files' sizes.
inline constexpr uint64_t kMaxManifestLayers = 1u << 16;
inline constexpr uint64_t kMaxExperts = 1u << 16;
inline constexpr uint64_t kMaxModelSize = 1u << 22;  // hidden and intermediate sizes
inline constexpr uint64_t kMaxTensorDims = 8;

// Everything that can be checked without the source checkpoint:
//  - `reference` is this moepack's reference point; `target` is exactly the object a deployment
//    writes (convert::deployment_from_target_json);
//  - every layer's names are known to the oracle (family, quantization keys, backend and its
//    experts class, activation, routing method), its counts and sizes are bounded, positive and
//    ordered (top_k <= num_experts, padded >= unpadded), its ranks are the deployment's ranks
//    (or one of them), each holding the same roles;
//  - every packed tensor is in a safetensors file the manifest lists, under its name, with the
//    manifest's dtype and shape; its layout is a registered layout, reduction or derivation that
//    yields exactly that dtype and shape from the recorded canonical form over the rank's experts;
//  - the canonical weights agree with the layer's padded sizes.
// `manifest_path` names the manifest in messages.
void validate_artifact(const artifact::Manifest& manifest, const std::string& artifact_dir, const std::string& manifest_path);

// With the source checkpoint: the manifest must describe exactly the conversion this moepack
// plans for that source and the recorded target — every layer's decision, sizes, run facts and
// every packed tensor's name, dtype, shape, layout and canonical form. What it cannot compare
// (file names, hashes) the integrity check proves. Throws Error(bad_input) at the first
// difference, naming the field and both values.
void validate_artifact_against_source(const artifact::Manifest& manifest, const std::string& manifest_path, const ckpt::Checkpoint& source,
                                      const std::string& source_path);

}  // namespace moepack::runtime
