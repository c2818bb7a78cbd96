#include "lib/convert/verify.h"

#include "lib/convert/artifact_runtime.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>

#include "formats/artifact/golden.h"
#include "formats/artifact/manifest.h"
#include "formats/checkpoints/checkpoint.h"
#include "formats/safetensors/file.h"
#include "lib/core/error.h"
#include "lib/core/hash.h"
#include "lib/core/mapped_file.h"
#include "lib/experts/cpu_mxfp4.h"
#include "lib/experts/dequant.h"
#include "lib/experts/moe.h"
#include "lib/experts/routing.h"
#include "packers/registry.h"

namespace moepack::convert {
namespace fs = std::filesystem;
namespace ex = experts;
namespace {

// ---- seeded inputs -------------------------------------------------------------------------

// splitmix64 and Box-Muller: the same numbers on every machine for one seed.
class Normal {
 public:
  explicit Normal(uint64_t seed) : state_(seed) {}
  float next() {
    const double u1 = (static_cast<double>(bits() >> 11) + 0.5) / 9007199254740992.0;
    const double u2 = static_cast<double>(bits() >> 11) / 9007199254740992.0;
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
  }

 private:
  uint64_t bits() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t state_;
};

std::vector<float> normal_values(uint64_t seed, uint64_t n) {
  Normal rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = rng.next();
  return v;
}

// Inputs of layer `index`: hidden states [T, H] and router logits [T, E].
struct LayerInputs {
  std::vector<float> x, logits;
};
LayerInputs layer_inputs(uint64_t seed, size_t index, uint64_t tokens, uint64_t hidden, uint64_t experts) {
  const uint64_t base = seed * 0x100000001B3ull + static_cast<uint64_t>(index) * 2 + 1;
  return {normal_values(base, tokens * hidden), normal_values(base + 0x5851F42D4C957F2Dull, tokens * experts)};
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

double verify_tolerance(const std::string& family) {
  // The emulation and the reference dequantize the same codes to the same floats and both
  // accumulate in double; they differ only in the order of additions (rank slices, padding),
  // so anything beyond float rounding of the result is a layout, scale or slicing error.
  (void)family;
  return 1e-5;
}

double fast_cpu_tolerance() {
  // BF16 activations carry 8 significant bits (relative rounding 2^-9 each); over sums of
  // thousands of products of mixed sign the measured error on the samples and on real-shape
  // gpt-oss-20b layers stays below 1e-2 of the largest output.
  return 2e-2;
}

VerifyReport verify_artifact(const VerifyOptions& o) {
  if (o.golden && o.write_golden) throw Error(ErrorKind::usage, "verify: --golden and --write-golden exclude each other");
  VerifyReport report;
  const std::string manifest_path = (fs::path(o.artifact) / artifact::kManifestFileName).string();
  if (!fs::is_regular_file(manifest_path))
    throw_bad_input(o.artifact, "", std::string("not a moepack artifact: there is no ") + artifact::kManifestFileName + " (convert writes one)");
  const artifact::Manifest m = artifact::read_manifest(manifest_path);

  std::optional<artifact::Golden> golden;
  if (o.golden) golden = artifact::read_golden(*o.golden);
  report.tokens = golden ? golden->tokens : o.tokens;
  report.seed = golden ? golden->seed : o.seed;
  if (report.tokens == 0) throw Error(ErrorKind::usage, "verify: --tokens must be at least 1");

  report.integrity = o.source ? check_artifact(o.artifact, *o.source) : check_artifact_integrity(o.artifact);
  std::optional<ckpt::Checkpoint> source;
  if (o.source) source = ckpt::open_checkpoint(*o.source);

  ArtifactRuntime runtime(o.artifact);
  artifact::Golden pinned;
  pinned.moepack_version = m.moepack_version;
  pinned.reference = m.reference;
  {
    MappedFile manifest_bytes(manifest_path);
    pinned.artifact = xxh3_128_hex(manifest_bytes.bytes());
  }
  pinned.seed = report.seed;
  pinned.tokens = report.tokens;

  for (size_t li = 0; li < m.layers.size(); ++li) {
    const artifact::Layer& L = m.layers[li];
    LayerVerdict v;
    v.prefix = L.prefix;
    v.family = L.family;
    v.backend = L.backend;
    v.ranks = L.ranks.size();
    v.tolerance = verify_tolerance(L.family);
    for (const auto& rank : L.ranks)
      for (const auto& [role, t] : rank.tensors) pinned.tensor_hashes[tensor_hash_key(t, rank, L.ranks.size())] = t.xxh3;
    if (auto why = runtime.cannot_run(li)) {
      v.ok = false;
      v.note = *why;
      report.layers.push_back(v);
      continue;
    }
    const uint64_t T = report.tokens, H = L.hidden_size, E = L.num_experts;
    LayerInputs in = layer_inputs(report.seed, li, T, H, E);
    const ex::Routing routing = runtime.route(li, in.logits, T);
    const std::vector<float> runtime_out = runtime.run(li, in.x, routing, T);
    pinned.outputs.push_back({L.prefix + ".output", DType::F32, {T, H}, std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(runtime_out.data()),
                                                                                           reinterpret_cast<const uint8_t*>(runtime_out.data() + runtime_out.size()))});
    for (float f : runtime_out)
      if (!std::isfinite(f)) {
        v.ok = false;
        v.note = "the runtime experts produced a non-finite output";
        break;
      }

    // The fast CPU experts answer to the same comparison: the source's reference when there is
    // one, else the exact emulation.
    std::optional<std::vector<float>> ref_out;
    if (source) ref_out = run_reference(*source, *o.source, L, in.x, routing, T);
    if (runtime.has_fast_cpu(li)) {
      const std::vector<float> fast = runtime.run_fast_cpu(li, in.x, routing, T);
      const std::vector<float>& against = ref_out ? *ref_out : runtime_out;
      double err = 0;
      for (size_t i = 0; i < fast.size(); ++i) err = std::max(err, std::fabs(static_cast<double>(fast[i]) - against[i]));
      v.fast_cpu_isa = std::string(ex::cpu_isa_name(ex::best_cpu_isa()));
      v.fast_max_rel_error = err / std::max(max_abs(against), 1e-30);
      v.fast_tolerance = fast_cpu_tolerance();
      if (!(v.fast_max_rel_error <= v.fast_tolerance)) {
        v.ok = false;
        v.note = "the fast CPU experts differ beyond their tolerance";
      }
    }
    if (ref_out) {
      const double scale = std::max(max_abs(*ref_out), 1e-30);
      for (size_t i = 0; i < ref_out->size(); ++i) v.max_abs_error = std::max(v.max_abs_error, std::fabs(static_cast<double>(runtime_out[i]) - (*ref_out)[i]));
      v.max_rel_error = v.max_abs_error / scale;
      v.compared_with = "source";
      if (v.max_rel_error > v.tolerance) {
        v.ok = false;
        v.note = "the runtime experts differ from the source's reference beyond the tolerance";
      }
    }
    if (golden) {
      const std::string name = L.prefix + ".output";
      auto it = std::find_if(golden->outputs.begin(), golden->outputs.end(), [&](const artifact::GoldenTensor& g) { return g.name == name; });
      if (it == golden->outputs.end()) {
        v.ok = false;
        v.note = "the golden file has no output for this layer";
      } else if (it->bytes != pinned.outputs.back().bytes || it->shape != pinned.outputs.back().shape) {
        v.ok = false;
        v.note = "the outputs differ from the golden file";
        if (it->shape == pinned.outputs.back().shape) {
          const float* g = reinterpret_cast<const float*>(it->bytes.data());
          for (size_t i = 0; i < runtime_out.size(); ++i) v.max_abs_error = std::max(v.max_abs_error, std::fabs(static_cast<double>(runtime_out[i]) - g[i]));
        }
      }
      if (v.compared_with.empty()) v.compared_with = "golden";
      else v.compared_with += "+golden";
    }
    report.layers.push_back(v);
  }

  if (golden) {
    for (const auto& [name, hash] : golden->tensor_hashes) {
      auto it = pinned.tensor_hashes.find(name);
      if (it == pinned.tensor_hashes.end()) report.golden_problems.push_back("golden tensor `" + name + "` is not in the artifact");
      else if (it->second != hash) report.golden_problems.push_back("`" + name + "`: XXH3-128 differs from the golden file");
    }
    for (const auto& [name, hash] : pinned.tensor_hashes)
      if (!golden->tensor_hashes.count(name)) report.golden_problems.push_back("packed tensor `" + name + "` is not in the golden file");
    for (const auto& g : golden->outputs)
      if (std::none_of(pinned.outputs.begin(), pinned.outputs.end(), [&](const artifact::GoldenTensor& p) { return p.name == g.name; }))
        report.golden_problems.push_back("golden output `" + g.name + "` has no layer in the artifact");
  }
  if (o.write_golden) artifact::write_golden(*o.write_golden, pinned);
  return report;
}

}  // namespace moepack::convert
