// `moepack verify`: proves an artifact by running it. Three checks, each optional but the first:
//
//   1. integrity  every file and packed tensor hashes to what the manifest says, every index
//                 resolves (artifact_check.h); with --source also every expert slab unpacks to
//                 the bytes vLLM's loader would hold (the layout proof).
//   2. numerics   per MoE layer, seeded hidden states and router logits go through the runtime
//                 experts — the artifact read rank by rank through each layout's unpack (the
//                 emulation of the packed layout), routed as the manifest says, summed over the
//                 tensor-parallel ranks — and, with --source, through the reference experts built
//                 from the source checkpoint's dequantized weights. Max abs and relative error
//                 against a per-family tolerance give the layer's verdict.
//   3. golden     --write-golden pins the outputs and the packed tensors' hashes; --golden
//                 compares a later run with them bit for bit.
//
// Activation quantization (FP8/MXFP4 activations of W4A8/W4A4 backends) is not emulated: both
// sides compute with float activations, so the comparison proves the weights' layout, scales,
// padding and tensor-parallel slicing, not a kernel's activation rounding.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "formats/artifact/manifest.h"
#include "lib/runtime/artifact_check.h"
#include "formats/checkpoints/checkpoint.h"

namespace moepack::runtime {

struct VerifyOptions {
  std::string artifact;
  std::optional<std::string> source;
  // The source already open, read instead of opening `source` (which still names it in
  // messages): a caller that holds the checkpoint, or one whose facts it changed, proves the
  // artifact against exactly that.
  const ckpt::Checkpoint* source_checkpoint = nullptr;
  uint64_t tokens = 8;
  uint64_t seed = 0;
  std::optional<std::string> write_golden;
  std::optional<std::string> golden;
  // Threads of the hashing, the source check and the experts (0: the CPUs this process may
  // use). The report is the same for any count.
  int threads = 0;
  // Quick mode: check against the source and run only this many MoE layers, spread evenly over
  // the model (the first and the last included; the same layers every time). Every file and
  // packed tensor is still hashed. nullopt: every layer.
  std::optional<uint64_t> sample_layers;
  // A progress line on stderr (lib/core/progress.h): the CLI's decision.
  bool show_progress = false;
};

struct LayerVerdict {
  std::string prefix;
  std::string family;
  std::string backend;
  uint64_t ranks = 1;
  std::string compared_with;   // "source", "golden", "" (ran, nothing to compare)
  double max_abs_error = 0;
  double max_rel_error = 0;    // max abs error / max |reference|
  double tolerance = 0;        // on the relative error
  bool ok = true;
  std::string note;            // why a layer was not run, or what differed
  // CPU layouts also run through the fast CPU experts (BF16 activations): their ISA and error
  // against the same comparison ("" when the layer has no fast kernel).
  std::string fast_cpu_isa;
  std::vector<std::string> fast_cpu_kernel_choices;  // the choices within the level (experts::cpu_kernel_choice_names)
  double fast_max_rel_error = 0;
  double fast_tolerance = 0;
  // False for a layer quick mode left out: only its tensors' hashes were checked.
  bool run = true;
};

struct VerifyReport {
  ArtifactCheck integrity;
  std::vector<LayerVerdict> layers;
  std::vector<std::string> golden_problems;
  uint64_t tokens = 0, seed = 0;
  uint64_t layers_run = 0;  // checked against the source (when given) and run; the rest only hashed
  bool ok() const;
};

// The layers quick mode keeps: `count` of `total` indices spread evenly, first and last
// included, ascending; all of them when count >= total.
std::vector<size_t> sampled_layers(size_t total, uint64_t count);

// The relative tolerance of a layer's comparison (documented in moepack-verify(1)), and of the
// fast CPU experts, whose activations are rounded to BF16.
double verify_tolerance(const artifact::Layer& layer);
double fast_cpu_tolerance();

// Throws Error(bad_input) for an unreadable artifact, source or golden file, Error(usage) for
// options that cannot work (both --golden and --write-golden, zero tokens, zero sampled layers).
VerifyReport verify_artifact(const VerifyOptions& options);

}  // namespace moepack::runtime
