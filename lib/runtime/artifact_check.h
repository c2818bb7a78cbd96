// Proves an artifact against its source without running a kernel: every file and packed tensor
// hashes to what the manifest says, and every packed tensor is exactly what its layout packs
// from the source expert's params as vLLM's loader would hold them for that rank (sliced and
// padded; so it unpacks through the layout's inverse to those params); and every safetensors index resolves (each name it lists is in the file
// it names) and agrees with the manifest, per rank when there are several. This is the layout
// half of `verify`; the numerical half (running the experts) lives in lib/experts.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "formats/artifact/manifest.h"
#include "formats/checkpoints/checkpoint.h"

namespace moepack::runtime {

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

// The steps of check_artifact, for a caller that interleaves them with its own per-layer work
// (verify checks a layer against the source, then runs it, while its bytes are in the page
// cache). `m` is the artifact's manifest, already validated (artifact_validation.h), against
// the source too before check_layer_against_source.
// Files, tensors and indexes against the manifest (check_artifact_integrity's checks): each file
// is read once, on `threads` threads, its packed tensors hashed from the same pass; `hashed` is
// told each piece read (its bytes, and whether it ended its file), from any of those threads.
using HashedBytes = std::function<void(uint64_t bytes, bool file_done)>;
void check_artifact_files(const std::string& artifact_dir, const artifact::Manifest& m, ArtifactCheck& out, int threads, const HashedBytes& hashed = {});
// check_artifact_files as a pass a caller moves through the files layer by layer, so a layer's
// bytes are read from disk once: hashed just before the caller checks and runs that layer, then
// found in the page cache (verify of a model larger than memory reads the artifact once).
class ArtifactFileCache;
class ArtifactHashPass {
 public:
  ArtifactHashPass(std::string artifact_dir, const artifact::Manifest& m, HashedBytes hashed = {});
  ~ArtifactHashPass();
  ArtifactHashPass(const ArtifactHashPass&) = delete;
  ArtifactHashPass& operator=(const ArtifactHashPass&) = delete;
  // Hashes every file up to the end of layer `layer_index`'s packed tensors (file order: the
  // files hold the layers in order), on up to `threads` threads, one per file.
  void advance_to_layer(size_t layer_index, int threads);
  // Hashes what is left and records the checks of check_artifact_files, in its order.
  void finish(ArtifactCheck& out, int threads);

 private:
  struct FileState;
  std::string dir_;
  const artifact::Manifest& m_;
  HashedBytes hashed_;
  std::unique_ptr<ArtifactFileCache> opened_;
  std::vector<std::unique_ptr<FileState>> files_;
  std::vector<std::vector<uint64_t>> layer_ends_;  // [layer][file]: end offset of its tensors there
};

// Layer `layer_index`'s packed tensors against the source: each expert slab must be what its
// layout packs from the source's loaded param (padding included), each reduction and derived
// output what the source gives. Experts are checked on `threads` threads; problems are listed
// in the order one thread finds them. `checked` is told each packed tensor's bytes once it is
// checked (on the calling thread).
using CheckedBytes = std::function<void(uint64_t bytes)>;
void check_layer_against_source(const std::string& artifact_dir, const artifact::Manifest& m, size_t layer_index, const ckpt::Checkpoint& source,
                                ArtifactCheck& out, int threads, const CheckedBytes& checked = {});

}  // namespace moepack::runtime
