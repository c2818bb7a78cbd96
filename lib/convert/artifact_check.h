// Proves an artifact against its source without running a kernel: every file and packed tensor
// hashes to what the manifest says, and every packed tensor, unpacked through its layout's
// inverse, equals the source expert's params as vLLM's loader would hold them for that rank
// (sliced and padded); and every safetensors index resolves (each name it lists is in the file
// it names) and agrees with the manifest, per rank when there are several. This is the layout
// half of `verify`; the numerical half (running the experts) lives in lib/experts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "formats/checkpoints/checkpoint.h"

namespace moepack::convert {

struct ArtifactCheck {
  uint64_t files_checked = 0;
  uint64_t tensors_checked = 0;
  uint64_t expert_slabs_checked = 0;
  std::vector<std::string> problems;  // empty: the artifact is proven
  bool ok() const { return problems.empty(); }
};

// The half that needs no source: every file and packed tensor hashes to what the manifest says,
// every index resolves and agrees with the manifest.
ArtifactCheck check_artifact_integrity(const std::string& artifact_dir);

// `artifact_dir` holds moepack.json; `source` is the checkpoint it was made from. Throws
// Error(bad_input) when either cannot be read at all; mismatches are listed in `problems`.
ArtifactCheck check_artifact(const std::string& artifact_dir, const std::string& source);
// The same with the source already open (verify opens it once for this and for the reference).
ArtifactCheck check_artifact(const std::string& artifact_dir, const ckpt::Checkpoint& source);

}  // namespace moepack::convert
