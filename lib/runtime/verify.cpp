#include "lib/runtime/verify.h"

#include <algorithm>
#include <cmath>
#include <future>
#include <mutex>
#include <set>

#include "formats/artifact/golden.h"
#include "formats/artifact/manifest.h"
#include "formats/checkpoints/checkpoint.h"
#include "lib/runtime/artifact_runtime.h"
#include "lib/runtime/artifact_validation.h"
#include "lib/core/codecs.h"
#include "lib/core/cpus.h"
#include "lib/core/error.h"
#include "lib/core/hash.h"
#include "lib/core/mapped_file.h"
#include "lib/core/progress.h"
#include "lib/experts/cpu_experts.h"
#include "lib/experts/routing.h"
#include "lib/experts/seeded.h"

namespace moepack::runtime {
namespace ex = experts;
namespace {

// ---- seeded inputs -------------------------------------------------------------------------

// Inputs of layer `index`: hidden states [T, H] and router logits [T, E].
// A hash-routed layer (DeepSeek-V4) also gets token ids below its table's rows.
// The hidden states are BF16 values, as a BF16 model's are when they reach its MoE layer: the
// fast CPU experts take them in BF16 (as vLLM's CPU kernels do), and with arbitrary floats
// their rounding would be an error of the input, not of the artifact. On random weights, whose
// pre-activations are large and cancel, that rounding alone reached 2% of the output
// (expert_ckpt.py's gpt-oss-20b layer), above the fast experts' tolerance, at every level.
struct LayerInputs {
  std::vector<float> x, logits;
  std::vector<int64_t> token_ids;
};
LayerInputs layer_inputs(uint64_t seed, size_t index, uint64_t tokens, uint64_t hidden, uint64_t experts, uint64_t hash_vocab) {
  const uint64_t base = seed * 0x100000001B3ull + static_cast<uint64_t>(index) * 2 + 1;
  LayerInputs in{ex::seeded_normal(base, tokens * hidden), ex::seeded_normal(base + 0x5851F42D4C957F2Dull, tokens * experts), {}};
  for (float& v : in.x) v = bf16_to_float(float_to_bf16(v));
  if (hash_vocab) in.token_ids = ex::seeded_indices(base + 0x2545F4914F6CDD1Dull, tokens, hash_vocab);
  return in;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

std::string tensor_hash_key(const artifact::PackedTensor& t, const artifact::RankTensors& r, size_t ranks) {
  return ranks > 1 ? t.name + "@rank" + std::to_string(r.rank) : t.name;
}

}  // namespace

bool VerifyReport::ok() const {
  if (!integrity.ok() || !golden_problems.empty()) return false;
  for (const auto& l : layers)
    if (!l.ok) return false;
  return true;
}

double verify_tolerance(const artifact::Layer& layer) {
  // The emulation and the reference dequantize the same codes to the same floats and both
  // accumulate in double; they differ only in the order of additions (rank slices, padding),
  // so anything beyond float rounding of the result is a layout, scale or slicing error.
  // Value stages that round (the b12x bake-in) are applied to the reference too, so they do
  // not loosen this.
  (void)layer;
  return 1e-5;
}

double fast_cpu_tolerance() {
  // The hidden states are BF16 already (layer_inputs); the activation between w13 and w2 is
  // rounded to BF16 (8 significant bits, relative rounding 2^-9 each) as vLLM's CPU kernels do,
  // and weights are exact in BF16 in every CPU layout the fast experts read. Over sums of thousands of products of
  // mixed sign the measured error on the samples (MXFP4, BF16, FP8 block, INT8: 2e-3 to 3e-3),
  // on random layers of Qwen3-30B-A3B, Mixtral and gpt-oss widths (up to 4e-3) and on real-shape
  // gpt-oss-20b layers stays below 1e-2 of the largest output.
  return 2e-2;
}

namespace {

// What a golden file written from this run pins before any layer runs: versions, the manifest's
// hash, seed and tokens.
artifact::Golden golden_header(const artifact::Manifest& m, const std::string& manifest_path, const VerifyReport& report) {
  artifact::Golden pinned;
  pinned.moepack_version = m.moepack_version;
  pinned.reference = m.reference;
  {
    MappedFile manifest_bytes(manifest_path);
    pinned.artifact = xxh3_128_hex(manifest_bytes.bytes());
  }
  pinned.seed = report.seed;
  pinned.tokens = report.tokens;
  return pinned;
}

// A layer's verdict before anything is compared: what the manifest says the layer is.
LayerVerdict verdict_for(const artifact::Layer& L) {
  LayerVerdict v;
  v.prefix = L.prefix;
  v.family = L.family;
  v.backend = L.backend;
  v.ranks = L.ranks.size();
  v.tolerance = verify_tolerance(L);
  return v;
}

void fail(LayerVerdict& v, const std::string& why) {
  v.ok = false;
  v.note = why;
}

// The fast CPU experts answer to the same comparison as the runtime experts: the source's
// reference when there is one, else the exact emulation (`against`).
void compare_fast_cpu(ArtifactRuntime& runtime, size_t li, const LayerInputs& in, const ex::Routing& routing, uint64_t tokens,
                      const std::vector<float>& against, LayerVerdict& v) {
  const std::vector<float> fast = runtime.run_fast_cpu(li, in.x, routing, tokens);
  double err = 0;
  for (size_t i = 0; i < fast.size(); ++i) err = std::max(err, std::fabs(static_cast<double>(fast[i]) - against[i]));
  v.fast_cpu_isa = std::string(ex::cpu_isa_name(ex::best_cpu_isa()));
  v.fast_cpu_kernel_choices = ex::cpu_kernel_choice_names(ex::best_cpu_isa(), ex::cpu_kernel_choice(ex::best_cpu_isa()));
  v.fast_max_rel_error = err / std::max(max_abs(against), 1e-30);
  v.fast_tolerance = fast_cpu_tolerance();
  if (!(v.fast_max_rel_error <= v.fast_tolerance)) fail(v, "the fast CPU experts differ beyond their tolerance");
}

void compare_with_source(const std::vector<float>& reference, const std::vector<float>& runtime_out, LayerVerdict& v) {
  const double scale = std::max(max_abs(reference), 1e-30);
  for (size_t i = 0; i < reference.size(); ++i) v.max_abs_error = std::max(v.max_abs_error, std::fabs(static_cast<double>(runtime_out[i]) - reference[i]));
  v.max_rel_error = v.max_abs_error / scale;
  v.compared_with = "source";
  if (v.max_rel_error > v.tolerance) fail(v, "the runtime experts differ from the source's reference beyond the tolerance");
}

// `output` is this run's pinned output of the layer; a golden file pins it byte for byte.
void compare_with_golden(const artifact::Golden& golden, const artifact::GoldenTensor& output, const std::vector<float>& runtime_out, LayerVerdict& v) {
  auto it = std::find_if(golden.outputs.begin(), golden.outputs.end(), [&](const artifact::GoldenTensor& g) { return g.name == output.name; });
  if (it == golden.outputs.end()) {
    fail(v, "the golden file has no output for this layer");
  } else if (it->bytes != output.bytes || it->shape != output.shape) {
    fail(v, "the outputs differ from the golden file");
    if (it->shape == output.shape) {
      const float* g = reinterpret_cast<const float*>(it->bytes.data());
      for (size_t i = 0; i < runtime_out.size(); ++i) v.max_abs_error = std::max(v.max_abs_error, std::fabs(static_cast<double>(runtime_out[i]) - g[i]));
    }
  }
  if (v.compared_with.empty()) v.compared_with = "golden";
  else v.compared_with += "+golden";
}

// Layer `li` run by the runtime experts on seeded inputs and compared with what there is to
// compare with; its output and tensor hashes are added to `pinned`.
LayerVerdict verify_layer(const VerifyOptions& o, const artifact::Manifest& m, size_t li, ArtifactRuntime& runtime,
                          const ckpt::Checkpoint* source, const std::optional<artifact::Golden>& golden, artifact::Golden& pinned, int threads) {
  const artifact::Layer& L = m.layers[li];
  LayerVerdict v = verdict_for(L);
  for (const auto& rank : L.ranks)
    for (const auto& [role, t] : rank.tensors) pinned.tensor_hashes[tensor_hash_key(t, rank, L.ranks.size())] = t.xxh3;
  if (auto why = runtime.cannot_run(li)) {
    fail(v, *why);
    return v;
  }
  const uint64_t T = pinned.tokens, H = L.hidden_size, E = L.num_experts;
  LayerInputs in = layer_inputs(pinned.seed, li, T, H, E, runtime.hash_vocab(li));
  const ex::Routing routing = runtime.route(li, in.logits, T, in.token_ids.empty() ? nullptr : &in.token_ids);
  const std::vector<float> runtime_out = runtime.run(li, in.x, routing, T, threads);
  pinned.outputs.push_back({L.prefix + ".output", DType::F32, {T, H}, std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(runtime_out.data()),
                                                                                         reinterpret_cast<const uint8_t*>(runtime_out.data() + runtime_out.size()))});
  if (std::any_of(runtime_out.begin(), runtime_out.end(), [](float f) { return !std::isfinite(f); }))
    fail(v, "the runtime experts produced a non-finite output");

  std::optional<std::vector<float>> ref_out;
  if (source) ref_out = run_reference(*source, *o.source, L, in.x, routing, T, runtime.manifest().target.value("dtype", std::string("bf16")), threads);
  if (runtime.has_fast_cpu(li)) compare_fast_cpu(runtime, li, in, routing, T, ref_out ? *ref_out : runtime_out, v);
  if (ref_out) compare_with_source(*ref_out, runtime_out, v);
  if (golden) compare_with_golden(*golden, pinned.outputs.back(), runtime_out, v);
  return v;
}

// Tensor hashes and outputs the golden file and this run do not share, or pin differently. The
// outputs of layers quick mode did not run (`not_run`: their output names) are not expected.
std::vector<std::string> golden_problems(const artifact::Golden& golden, const artifact::Golden& pinned, const std::set<std::string>& not_run) {
  std::vector<std::string> problems;
  for (const auto& [name, hash] : golden.tensor_hashes) {
    auto it = pinned.tensor_hashes.find(name);
    if (it == pinned.tensor_hashes.end()) problems.push_back("golden tensor `" + name + "` is not in the artifact");
    else if (it->second != hash) problems.push_back("`" + name + "`: XXH3-128 differs from the golden file");
  }
  for (const auto& [name, hash] : pinned.tensor_hashes)
    if (!golden.tensor_hashes.count(name)) problems.push_back("packed tensor `" + name + "` is not in the golden file");
  for (const auto& g : golden.outputs)
    if (!not_run.count(g.name) && std::none_of(pinned.outputs.begin(), pinned.outputs.end(), [&](const artifact::GoldenTensor& p) { return p.name == g.name; }))
      problems.push_back("golden output `" + g.name + "` has no layer in the artifact");
  return problems;
}

}  // namespace

std::vector<size_t> sampled_layers(size_t total, uint64_t count) {
  std::vector<size_t> out;
  if (count >= total) {
    for (size_t i = 0; i < total; ++i) out.push_back(i);
    return out;
  }
  if (count == 0) return out;
  if (count == 1) return {0};
  // Index i of count at i * (total - 1) / (count - 1), rounded: steps of at least 1, so distinct.
  for (uint64_t i = 0; i < count; ++i) out.push_back(static_cast<size_t>((i * (total - 1) * 2 + (count - 1)) / (2 * (count - 1))));
  return out;
}

namespace {

uint64_t packed_bytes_of(const artifact::Layer& L) {
  uint64_t bytes = 0;
  for (const auto& r : L.ranks)
    for (const auto& [role, t] : r.tensors) {
      const auto dtype = dtype_from_name(t.dtype);
      if (dtype) bytes += byte_size(*dtype, t.shape);
    }
  return bytes;
}

}  // namespace

VerifyReport verify_artifact(const VerifyOptions& o) {
  if (o.golden && o.write_golden) throw Error(ErrorKind::usage, "verify: --golden and --write-golden exclude each other");
  if (o.sample_layers && *o.sample_layers == 0) throw Error(ErrorKind::usage, "verify: --layers must be at least 1");
  VerifyReport report;
  const int threads = thread_count(o.threads);
  ArtifactRuntime runtime(o.artifact);  // refuses a directory that is not an artifact
  const artifact::Manifest& m = runtime.manifest();

  std::optional<artifact::Golden> golden;
  if (o.golden) golden = artifact::read_golden(*o.golden);
  report.tokens = golden ? golden->tokens : o.tokens;
  report.seed = golden ? golden->seed : o.seed;
  if (report.tokens == 0) throw Error(ErrorKind::usage, "verify: --tokens must be at least 1");

  std::optional<ckpt::Checkpoint> opened;
  if (o.source && !o.source_checkpoint) opened = ckpt::open_checkpoint(*o.source);
  const ckpt::Checkpoint* source = o.source_checkpoint ? o.source_checkpoint : opened ? &*opened : nullptr;
  // Every layer, size and tensor entry must be what converting this source gives, before a byte
  // of the source is compared with the artifact.
  if (source) validate_artifact_against_source(m, runtime.manifest_path(), *source, *o.source);

  std::vector<bool> selected(m.layers.size(), !o.sample_layers);
  if (o.sample_layers)
    for (size_t i : sampled_layers(m.layers.size(), *o.sample_layers)) selected[i] = true;
  uint64_t file_bytes = 0, layer_bytes = 0, layers_to_run = 0;
  for (const auto& f : m.files) file_bytes += f.bytes;
  for (size_t li = 0; li < m.layers.size(); ++li)
    if (selected[li]) {
      layer_bytes += packed_bytes_of(m.layers[li]);
      ++layers_to_run;
    }
  // One progress line over the bytes hashed and each layer's packed bytes (counted as its
  // tensors are checked against the source, or when it has run).
  ByteProgress progress(o.show_progress, file_bytes + layer_bytes, layers_to_run, "layer");
  std::mutex progress_mutex;  // the hashing runs beside the layers
  auto locked = [&](auto&& f) {
    std::lock_guard<std::mutex> lock(progress_mutex);
    f();
  };
  ArtifactCheck layer_checks;  // the source check's findings, reported after the hashes as before
  artifact::Golden pinned = golden_header(m, runtime.manifest_path(), report);
  std::set<std::string> not_run;
  std::vector<std::optional<LayerVerdict>> verdicts(m.layers.size());
  {
    // The artifact is read once: while layer i is checked and run, the hash pass reads on to
    // the end of the next layer to run, which that layer then finds in the page cache.
    ArtifactHashPass pass(o.artifact, m, [&](uint64_t bytes, bool) { locked([&] { progress.add(bytes); }); });
    std::vector<size_t> to_run;
    for (size_t li = 0; li < m.layers.size(); ++li)
      if (selected[li]) to_run.push_back(li);
    auto hash_through = [&](size_t li) { return std::async(std::launch::async, [&pass, li, threads] { pass.advance_to_layer(li, threads); }); };
    std::future<void> hashing;
    if (!to_run.empty()) hashing = hash_through(to_run.front());
    for (size_t k = 0; k < to_run.size(); ++k) {
      hashing.get();  // layer to_run[k]'s bytes hashed, so in the page cache
      if (k + 1 < to_run.size()) hashing = hash_through(to_run[k + 1]);
      const size_t li = to_run[k];
      const artifact::Layer& L = m.layers[li];
      if (source) {
        locked([&] { progress.set_activity(L.prefix + ": against the source", true); });
        check_layer_against_source(o.artifact, m, li, *source, layer_checks, threads, [&](uint64_t bytes) { locked([&] { progress.add(bytes); }); });
      }
      locked([&] { progress.set_activity(L.prefix + ": running", true); });
      verdicts[li] = verify_layer(o, m, li, runtime, source, golden, pinned, threads);
      runtime.release_layer(li);
      ++report.layers_run;
      locked([&] {
        if (!source) progress.add(packed_bytes_of(L));  // with a source, counted tensor by tensor as checked
        progress.unit_done();
      });
    }
    if (hashing.valid()) hashing.get();
    locked([&] { progress.set_activity("hashing the rest of the artifact", true); });
    pass.finish(report.integrity, threads);
  }
  report.integrity.expert_slabs_checked += layer_checks.expert_slabs_checked;
  report.integrity.problems.insert(report.integrity.problems.end(), layer_checks.problems.begin(), layer_checks.problems.end());
  for (size_t li = 0; li < m.layers.size(); ++li) {
    const artifact::Layer& L = m.layers[li];
    if (selected[li]) {
      report.layers.push_back(std::move(*verdicts[li]));
      continue;
    }
    LayerVerdict v = verdict_for(L);
    v.run = false;
    v.note = "not run: quick mode (--layers " + std::to_string(*o.sample_layers) + " of " + std::to_string(m.layers.size()) + "); its tensors' hashes were checked";
    for (const auto& rank : L.ranks)
      for (const auto& [role, t] : rank.tensors) pinned.tensor_hashes[tensor_hash_key(t, rank, L.ranks.size())] = t.xxh3;
    not_run.insert(L.prefix + ".output");
    report.layers.push_back(std::move(v));
  }
  progress.finish();
  if (golden) report.golden_problems = golden_problems(*golden, pinned, not_run);
  if (o.write_golden) artifact::write_golden(*o.write_golden, pinned);
  return report;
}

}  // namespace moepack::runtime
