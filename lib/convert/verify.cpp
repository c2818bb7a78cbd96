#include "lib/convert/verify.h"

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

// ---- the artifact's tensors ----------------------------------------------------------------

class ArtifactFiles {
 public:
  explicit ArtifactFiles(std::string dir) : dir_(std::move(dir)) {}
  const st::File& file(const std::string& name) {
    auto& slot = files_[name];
    if (!slot) slot = std::make_unique<st::File>((fs::path(dir_) / name).string());
    return *slot;
  }
  // Bytes of a packed tensor, checked against its header (the integrity check hashed them).
  std::vector<uint8_t> read(const artifact::PackedTensor& t) {
    const st::File& f = file(t.file);
    const st::TensorInfo* info = f.find(t.name);
    if (!info) throw_bad_input(dir_ + "/" + t.file, t.name, "missing from the file the manifest names");
    std::vector<uint8_t> bytes(static_cast<size_t>(info->num_bytes()));
    f.read(*info, 0, bytes);
    return bytes;
  }
  // A pass-through tensor (e.g. the router's correction bias) in whichever file holds it.
  std::optional<OwnedTensor> find_tensor(const artifact::Manifest& m, const std::string& name) {
    for (const auto& fe : m.files) {
      if (!fe.name.ends_with(".safetensors")) continue;
      const st::File& f = file(fe.name);
      if (const st::TensorInfo* info = f.find(name)) {
        OwnedTensor t(info->dtype, info->shape);
        f.read(*info, 0, t.bytes);
        return t;
      }
    }
    return std::nullopt;
  }

 private:
  std::string dir_;
  std::map<std::string, std::unique_ptr<st::File>> files_;
};

DType dtype_of(const std::string& name, const std::string& where) {
  auto d = dtype_from_name(name);
  if (!d) throw_bad_input(where, "", "unknown dtype `" + name + "`");
  return *d;
}

// One rank of one layer as the runtime reads it: every per-expert tensor's bytes and layout.
struct RankTensorsRead {
  struct Role {
    std::vector<uint8_t> bytes;
    std::shared_ptr<const packers::Layout> layout;
    OwnedTensor canonical_template;  // dtype and shape of one expert's canonical tensor
    uint64_t slab = 0;
  };
  std::map<std::string, Role> roles;
  uint64_t first_expert = 0, local_experts = 0;
};

RankTensorsRead read_rank(ArtifactFiles& files, const artifact::Layer& layer, const artifact::RankTensors& rank, uint64_t first_expert, uint64_t local,
                          const std::string& manifest_path) {
  RankTensorsRead r;
  r.first_expert = first_expert;
  r.local_experts = local;
  for (const auto& [role, t] : rank.tensors) {
    if (!t.per_expert) continue;  // per-layer reductions (input scales) do not enter the float computation
    if (t.canonical_dtype.empty())
      throw_bad_input(manifest_path, t.name, "the manifest does not record the canonical form of the packed tensors (written by an older moepack): convert again to verify");
    RankTensorsRead::Role rr;
    rr.bytes = files.read(t);
    if (local == 0 || rr.bytes.size() % local) throw_bad_input(manifest_path, t.name, std::to_string(rr.bytes.size()) + " bytes do not split into " + std::to_string(local) + " expert slabs");
    rr.slab = rr.bytes.size() / local;
    rr.layout = std::shared_ptr<const packers::Layout>(packers::make_layout(t.layout));
    rr.canonical_template = OwnedTensor(dtype_of(t.canonical_dtype, manifest_path), t.canonical_shape);
    if (byte_size(rr.canonical_template.dtype, t.canonical_shape) == 0) throw_bad_input(manifest_path, t.name, "empty canonical shape");
    r.roles.emplace(role, std::move(rr));
  }
  (void)layer;
  return r;
}

OwnedTensor unpack_expert(const RankTensorsRead::Role& role, uint64_t local_index) {
  OwnedTensor out = role.canonical_template;
  role.layout->unpack(std::span<const uint8_t>(role.bytes).subspan(static_cast<size_t>(local_index * role.slab), static_cast<size_t>(role.slab)), out);
  return out;
}

// The float weights of one expert from its canonical tensors (keyed by role).
ex::ExpertMatrices matrices_from(const std::map<std::string, OwnedTensor>& t, ex::WeightFormat format, uint64_t n13, uint64_t hidden, uint64_t inter,
                                 const std::string& where) {
  auto get = [&](const std::string& role) -> const OwnedTensor* {
    auto it = t.find(role);
    return it == t.end() ? nullptr : &it->second;
  };
  const OwnedTensor* w13 = get("w13_weight");
  const OwnedTensor* w2 = get("w2_weight");
  if (!w13 || !w2) throw_bad_input(where, "", "w13_weight and w2_weight are needed to run the experts");
  const bool scaled = ex::format_info(format).block != 0;
  const OwnedTensor* s13 = scaled ? get("w13_weight_scale") : nullptr;
  const OwnedTensor* s2 = scaled ? get("w2_weight_scale") : nullptr;
  if (scaled && (!s13 || !s2)) throw_bad_input(where, "", "block scales are needed to run " + std::string(ex::format_info(format).name) + " experts");
  ex::ExpertMatrices m;
  m.w13 = ex::dequantize(format, *w13, s13, n13, hidden);
  m.w2 = ex::dequantize(format, *w2, s2, hidden, inter);
  if (const OwnedTensor* b = get("w13_bias")) m.w13_bias = ex::float_values(*b);
  if (const OwnedTensor* b = get("w2_bias")) m.w2_bias = ex::float_values(*b);
  return m;
}

ex::ActivationSpec activation_of(const artifact::Layer& l) { return {l.activation, l.swiglu_limit, l.swiglu_alpha, l.swiglu_beta}; }

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

  ArtifactFiles files(o.artifact);
  artifact::Golden pinned;
  pinned.moepack_version = m.moepack_version;
  pinned.reference = m.reference;
  {
    MappedFile manifest_bytes(manifest_path);
    pinned.artifact = xxh3_128_hex(manifest_bytes.bytes());
  }
  pinned.seed = report.seed;
  pinned.tokens = report.tokens;

  const bool expert_parallel = m.target.value("ep", false);
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
    const auto format = ex::weight_format_of(L.family, L.weight_key.value_or(""));
    if (!L.routing || !format) {
      v.ok = false;
      v.note = !L.routing ? "the manifest does not record how the layer routes (written by an older moepack): convert again to verify"
                          : "the runtime experts cannot run family " + L.family + " yet";
      report.layers.push_back(v);
      continue;
    }
    const uint64_t T = report.tokens, H = L.hidden_size, E = L.num_experts;
    const uint64_t Hp = L.padded_hidden_size, P = L.padded_intermediate_size;
    const auto rows = ex::parse_w13_rows(L.w13_rows);
    const ex::ActivationSpec act = activation_of(L);

    ex::RoutingSpec rs;
    rs.method = L.routing->method;
    rs.top_k = L.top_k;
    rs.n_group = L.routing->n_group;
    rs.topk_group = L.routing->topk_group;
    rs.renormalize = L.routing->renormalize;
    rs.routed_scaling_factor = L.routing->routed_scaling_factor.value_or(1.0);
    if (L.routing->correction_bias) {
      auto bias = files.find_tensor(m, *L.routing->correction_bias);
      if (!bias) throw_bad_input(manifest_path, *L.routing->correction_bias, "the router's correction bias is not in the artifact");
      rs.correction_bias = ex::float_values(*bias);
    }
    LayerInputs in = layer_inputs(report.seed, li, T, H, E);
    const ex::Routing routing = ex::route(in.logits, T, E, rs);

    // Runtime: every rank's slice through the layout's unpack, at that rank's padded sizes.
    std::vector<float> xp(static_cast<size_t>(T * Hp), 0.0f);
    for (uint64_t t = 0; t < T; ++t) std::copy_n(in.x.data() + t * H, H, xp.data() + t * Hp);
    std::vector<double> total(static_cast<size_t>(T * H), 0.0);
    const uint64_t local = expert_parallel ? E / std::max<uint64_t>(1, L.ranks.size()) : E;
    ex::MoeShape rank_shape{Hp, P, L.gated, *rows};
    const uint64_t n13 = L.gated ? 2 * P : P;
    for (const auto& rank : L.ranks) {
      const uint64_t first = expert_parallel ? local * static_cast<uint64_t>(rank.rank) : 0;
      RankTensorsRead rt = read_rank(files, L, rank, first, local, manifest_path);
      const std::string where = manifest_path + " (" + L.prefix + ", rank " + std::to_string(rank.rank) + ")";
      ex::ExpertSource runtime = [&](uint64_t e) -> std::optional<ex::ExpertMatrices> {
        if (e < rt.first_expert || e >= rt.first_expert + rt.local_experts) return std::nullopt;
        std::map<std::string, OwnedTensor> canonical;
        for (const auto& [role, rr] : rt.roles) canonical.emplace(role, unpack_expert(rr, e - rt.first_expert));
        return matrices_from(canonical, *format, n13, Hp, P, where);
      };
      std::vector<double> out(static_cast<size_t>(T * Hp), 0.0);
      ex::accumulate_experts(xp, T, routing, runtime, rank_shape, act, out);
      for (uint64_t t = 0; t < T; ++t)
        for (uint64_t h = 0; h < H; ++h) total[t * H + h] += out[t * Hp + h];
    }
    std::vector<float> runtime_out(total.begin(), total.end());
    pinned.outputs.push_back({L.prefix + ".output", DType::F32, {T, H}, std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(runtime_out.data()),
                                                                                           reinterpret_cast<const uint8_t*>(runtime_out.data() + runtime_out.size()))});
    for (float f : runtime_out)
      if (!std::isfinite(f)) {
        v.ok = false;
        v.note = "the runtime experts produced a non-finite output";
        break;
      }

    if (source) {
      const ckpt::MoeLayer* sl = source->find_layer(L.prefix);
      if (!sl) throw_bad_input(*o.source, L.prefix, "the source has no such MoE layer");
      const uint64_t I = sl->intermediate_size, SH = sl->hidden_size;
      const uint64_t src_n13 = sl->gated ? 2 * I : I;
      ex::MoeShape ref_shape{SH, I, sl->gated, sl->recipe.w13_order == ckpt::W13Order::interleaved ? ex::W13Rows::interleaved : ex::W13Rows::gate_up_halves};
      ex::ExpertSource reference = [&](uint64_t e) -> std::optional<ex::ExpertMatrices> {
        ckpt::ExpertParams p = ckpt::read_expert_params(*source, *sl, e);
        return matrices_from(p.tensors, *format, src_n13, SH, I, *o.source + " (" + L.prefix + ")");
      };
      std::vector<double> ref(static_cast<size_t>(T * SH), 0.0);
      ex::accumulate_experts(in.x, T, routing, reference, ref_shape, act, ref);
      std::vector<float> ref_out(ref.begin(), ref.end());
      const double scale = std::max(max_abs(ref_out), 1e-30);
      for (size_t i = 0; i < ref_out.size(); ++i) v.max_abs_error = std::max(v.max_abs_error, std::fabs(static_cast<double>(runtime_out[i]) - ref_out[i]));
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
