#include "lib/runtime/artifact_validation.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

#include "formats/safetensors/file.h"
#include "lib/convert/derivations.h"
#include "lib/convert/plan.h"
#include "lib/convert/reductions.h"
#include "lib/convert/target.h"
#include "lib/core/error.h"
#include "lib/core/tensor.h"
#include "lib/experts/dequant.h"
#include "lib/oracle/moe_types.h"
#include "lib/oracle/oracle.h"
#include "lib/oracle/quant_key.h"
#include "packers/registry.h"

namespace moepack::runtime {

// From the conversion room: the loader geometry, derivations, reductions and stages with
// their read-backs, and the artifact's file naming.
using convert::ConversionPlan;
using convert::ConvertRequest;
using convert::DerivedKind;
using convert::DerivedLayout;
using convert::LayerPlan;
using convert::LayerReduction;
using convert::PackedTensorPlan;
using convert::RankPlan;
using convert::build_conversion_plan;
using convert::decide_layers;
using convert::deployment_from_target_json;
using convert::derived_layout;
using convert::find_reduction;
using convert::find_value_stage;
using convert::kValueStageSeparator;
using convert::manifest_entry;

namespace fs = std::filesystem;
namespace {

using ojson = nlohmann::ordered_json;

std::string ticked(const std::string& s) { return "`" + s + "`"; }

// Failures name the manifest, the field's path and what disagrees.
class Check {
 public:
  explicit Check(const std::string& manifest_path) : path_(manifest_path) {}
  [[noreturn]] void fail(const std::string& field, const std::string& what) const { throw_bad_input(path_, "", "manifest: `" + field + "` " + what); }
  void require(bool ok, const std::string& field, const std::string& what) const {
    if (!ok) fail(field, what);
  }
  const std::string& path() const { return path_; }

 private:
  const std::string& path_;
};

std::string shape_text(const std::vector<uint64_t>& s) { return shape_string(s); }

// The artifact's safetensors files, opened through the strict reader once each, and only when
// the manifest lists them (a tensor's `file` must be one of `files`).
class ArtifactShards {
 public:
  ArtifactShards(const artifact::Manifest& m, std::string dir) : dir_(std::move(dir)) {
    for (const auto& f : m.files) listed_.insert(f.name);
  }
  bool listed(const std::string& name) const { return listed_.count(name) != 0; }
  const st::File& open(const std::string& name) {
    auto& slot = files_[name];
    if (!slot) slot = std::make_unique<st::File>((fs::path(dir_) / name).string());
    return *slot;
  }

 private:
  std::string dir_;
  std::set<std::string> listed_;
  std::map<std::string, std::unique_ptr<st::File>> files_;
};

// ---- the layer's names and numbers ---------------------------------------------------------

void check_names(const Check& c, const artifact::Layer& l, const std::string& w) {
  const auto family = oracle::parse_family(l.family);
  c.require(family.has_value(), w + ".family", "is " + ticked(l.family) + ", no quantization family this moepack knows");
  for (const auto& [key, value] : {std::pair{"weight_key", l.weight_key}, std::pair{"activation_key", l.activation_key}})
    if (value) c.require(oracle::quant_key_by_name(*value).has_value(), w + "." + key, "is " + ticked(*value) + ", no vLLM QuantKey name");
  // The backend must be one vLLM has for this family, and the experts class one vLLM has (not
  // always among the backend's own: compressed-tensors MXFP4 runs CUTLASS's class under the
  // MARLIN enum member, as its method picks the class itself). The exact pairing is the
  // oracle's decision, which `verify --source` compares.
  bool backend_known = false;
  for (const auto& b : oracle::backend_catalog()) backend_known = backend_known || (b.family == l.family && b.backend == l.backend);
  c.require(backend_known, w + ".backend", "is " + ticked(l.backend) + ", no backend vLLM has for family " + l.family);
  const auto classes = oracle::experts_class_catalog();
  c.require(std::any_of(classes.begin(), classes.end(), [&](const auto& k) { return k.name == l.experts_class; }), w + ".experts_class",
            "is " + ticked(l.experts_class) + ", no experts class vLLM has");
  c.require(oracle::parse_activation(l.activation).has_value(), w + ".activation", "is " + ticked(l.activation) + ", no MoEActivation vLLM has");
  if (l.routing) {
    c.require(oracle::parse_routing_method(l.routing->method).has_value(), w + ".routing.method",
              "is " + ticked(l.routing->method) + ", no RoutingMethodType vLLM has");
    const std::string& sf = l.routing->scoring_func;
    c.require(sf == "softmax" || sf == "sigmoid" || sf == "sqrtsoftplus", w + ".routing.scoring_func",
              "is " + ticked(sf) + " (known: softmax, sigmoid, sqrtsoftplus)");
  }
}

void check_numbers(const Check& c, const artifact::Layer& l, const std::string& w) {
  auto bounded = [&](uint64_t v, uint64_t max, const std::string& key) {
    c.require(v >= 1 && v <= max, w + "." + key, "is " + std::to_string(v) + ", outside 1.." + std::to_string(max));
  };
  bounded(l.num_experts, kMaxExperts, "num_experts");
  bounded(l.top_k, l.num_experts, "top_k");
  bounded(l.hidden_size, kMaxModelSize, "hidden_size");
  bounded(l.intermediate_size, kMaxModelSize, "intermediate_size");
  // A real size above its padded one: name the real size, the field an edit most likely touched.
  for (const auto& [key, real, padded] :
       {std::tuple{"hidden_size", l.hidden_size, l.padded_hidden_size}, std::tuple{"intermediate_size", l.intermediate_size, l.padded_intermediate_size}}) {
    c.require(real <= padded, w + "." + key, "is " + std::to_string(real) + ", above padded_" + key + " (" + std::to_string(padded) + ")");
    c.require(padded <= kMaxModelSize, w + ".padded_" + key, "is " + std::to_string(padded) + ", above " + std::to_string(kMaxModelSize));
  }
  if (l.routing) {
    const artifact::RoutingFacts& r = *l.routing;
    c.require(r.n_group <= l.num_experts && (r.n_group == 0 || l.num_experts % r.n_group == 0), w + ".routing.n_group",
              "is " + std::to_string(r.n_group) + ", which does not divide the " + std::to_string(l.num_experts) + " experts");
    c.require(r.topk_group <= r.n_group, w + ".routing.topk_group",
              "is " + std::to_string(r.topk_group) + ", above n_group (" + std::to_string(r.n_group) + ")");
    if (r.routed_scaling_factor) c.require(std::isfinite(*r.routed_scaling_factor), w + ".routing.routed_scaling_factor", "is not a finite number");
  }
  for (const auto& [key, v] : {std::pair{"swiglu_limit", l.swiglu_limit}, std::pair{"swiglu_alpha", l.swiglu_alpha}, std::pair{"swiglu_beta", l.swiglu_beta}})
    if (v) c.require(std::isfinite(*v), w + "." + key, "is not a finite number");
}

// ---- one packed tensor ---------------------------------------------------------------------

// A canonical shape the layouts may be asked about: few dims, no element count past what any
// file here could hold.
void check_canonical(const Check& c, const artifact::PackedTensor& t, const std::string& tw) {
  if (t.canonical_dtype.empty()) return;  // an older manifest: the runtime says what it lacks
  c.require(dtype_from_name(t.canonical_dtype).has_value(), tw + ".canonical.dtype", "is " + ticked(t.canonical_dtype) + ", no safetensors dtype");
  c.require(t.canonical_shape.size() <= kMaxTensorDims, tw + ".canonical.shape", "has " + std::to_string(t.canonical_shape.size()) + " dims");
  uint64_t elements = 1;
  for (uint64_t d : t.canonical_shape) {
    c.require(d <= (uint64_t{1} << 40) && (d == 0 || elements <= (uint64_t{1} << 40) / d), tw + ".canonical.shape",
              "is " + shape_text(t.canonical_shape) + ", larger than any tensor");
    elements *= d;
  }
}

// The packed dtype and storage shape the tensor's layout gives for its canonical form over
// `local` experts, which must be the recorded ones (already equal to the file's header).
void check_layout(const Check& c, const artifact::PackedTensor& t, uint64_t local, const std::string& tw) {
  if (!t.per_expert) {
    const LayerReduction* reduction = find_reduction(t.layout);
    c.require(reduction != nullptr, tw + ".layout", "is " + ticked(t.layout) + ", no per-layer reduction this moepack knows");
    const std::vector<uint64_t> shape = reduction->shape(local);
    c.require(t.dtype == dtype_name(reduction->dtype()) && t.shape == shape, tw + ".shape",
              "is " + t.dtype + " " + shape_text(t.shape) + ", but " + reduction->name() + " over " + std::to_string(local) + " experts is " +
                  std::string(dtype_name(reduction->dtype())) + " " + shape_text(shape));
    return;
  }
  if (t.canonical_dtype.empty()) return;
  if (!t.value_stage.empty())
    c.require(find_value_stage(t.value_stage) != nullptr, tw + ".canonical.value_stage", "is " + ticked(t.value_stage) + ", no value stage this moepack knows");
  const uint64_t bytes = byte_size(*dtype_from_name(t.dtype), t.shape);
  const DerivedLayout derived = derived_layout(t.layout);
  if (derived.kind == DerivedKind::empty) {
    c.require(bytes == 0, tw + ".shape", "is " + shape_text(t.shape) + ", but " + ticked(t.layout) + " is an empty placeholder");
    return;
  }
  c.require(bytes % local == 0, tw + ".shape", "is " + shape_text(t.shape) + ", which does not split into " + std::to_string(local) + " expert slabs");
  const uint64_t slab = bytes / local;
  const DType canonical = *dtype_from_name(t.canonical_dtype);
  const uint64_t canonical_bytes = byte_size(canonical, t.canonical_shape);
  if (derived.kind == DerivedKind::sorted_g_idx || derived.kind == DerivedKind::sort_indices) {
    c.require(slab == canonical_bytes, tw + ".canonical.shape",
              "is " + shape_text(t.canonical_shape) + " (" + std::to_string(canonical_bytes) + " bytes), but each expert's slab holds " + std::to_string(slab));
    return;
  }
  const std::string id = derived.kind == DerivedKind::none ? t.layout : derived.inner;
  // Every stage of a pipeline id must be registered before anything is built from it.
  for (size_t start = 0;;) {
    const size_t bar = id.find(packers::kPipelineSeparator, start);
    const std::string stage = id.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
    c.require(packers::find_layout(stage) != nullptr, tw + ".layout", "is " + ticked(t.layout) + ": " + ticked(stage) + " is no layout this moepack knows");
    if (bar == std::string::npos) break;
    start = bar + packers::kPipelineSeparator.size();
  }
  const auto layout = packers::make_layout(id);
  std::vector<uint64_t> packed_shape;
  DType packed_dtype;
  try {
    packed_dtype = layout->packed_dtype(canonical);
    packed_shape = layout->packed_shape(t.canonical_shape);
  } catch (const Error& e) {
    c.fail(tw + ".canonical", "is " + t.canonical_dtype + " " + shape_text(t.canonical_shape) + ", which layout " + ticked(id) + " does not take: " + e.what());
  }
  const uint64_t packed_bytes = byte_size(packed_dtype, packed_shape);
  c.require(packed_bytes == slab, tw + ".shape",
            "is " + shape_text(t.shape) + " (" + std::to_string(slab) + " bytes per expert), but " + ticked(id) + " packs the canonical " + t.canonical_dtype +
                " " + shape_text(t.canonical_shape) + " into " + std::to_string(packed_bytes));
  if (derived.kind == DerivedKind::none) {
    c.require(t.dtype == dtype_name(packed_dtype), tw + ".dtype", "is " + t.dtype + ", but " + ticked(id) + " stores " + std::string(dtype_name(packed_dtype)));
    const std::vector<uint64_t> shape = layout->parameter_shape(local, t.canonical_shape);
    c.require(t.shape == shape, tw + ".shape",
              "is " + shape_text(t.shape) + ", but " + ticked(id) + " holds " + std::to_string(local) + " experts as " + shape_text(shape));
  }
}

// Whether `id` names something a tensor can be made with: a registered layout or pipeline of
// them, a per-layer reduction, a derivation, optionally after a value stage.
bool is_layout_id(const std::string& id) {
  const size_t stage = id.find(kValueStageSeparator);
  if (stage != std::string::npos) return is_layout_id(id.substr(stage + kValueStageSeparator.size()));
  if (find_reduction(id) || derived_layout(id).kind != DerivedKind::none) return true;
  for (size_t start = 0;;) {
    const size_t bar = id.find(packers::kPipelineSeparator, start);
    if (!packers::find_layout(id.substr(start, bar == std::string::npos ? std::string::npos : bar - start))) return false;
    if (bar == std::string::npos) return true;
    start = bar + packers::kPipelineSeparator.size();
  }
}

// The layout a backend gives the role: when the oracle's catalog lists the role's layouts for
// this backend as ids, the tensor's (its value stage aside) must be one of them. Roles whose
// listing describes layouts computed per layer (act-order derivations) are left to the layout
// checks above and, with the source, to the comparison with its conversion.
void check_layout_belongs(const Check& c, const artifact::Layer& l, const std::string& role, const artifact::PackedTensor& t, const std::string& tw) {
  const std::vector<std::string> listed = oracle::listed_layouts(l.family, l.backend, role);
  if (listed.empty() || !std::all_of(listed.begin(), listed.end(), is_layout_id)) return;
  for (const auto& layout : listed) {
    const size_t stage = layout.find(kValueStageSeparator);
    const std::string bare = stage == std::string::npos ? layout : layout.substr(stage + kValueStageSeparator.size());
    if (bare == t.layout || layout == t.layout) return;
  }
  std::string known;
  for (const auto& layout : listed) known += (known.empty() ? "" : ", ") + ticked(layout);
  c.fail(tw + ".layout", "is " + ticked(t.layout) + ", not a layout backend " + l.backend + " gives " + role + " (" + known + ")");
}

// Bits of one weight value: the quantization key's element width, or the float dtype's own.
std::optional<uint64_t> value_bits(const artifact::Layer& l, DType canonical) {
  const std::string key = l.weight_key.value_or("");
  if (key.empty()) return dtype_bits(canonical);
  for (const char* four : {"Int4", "fp4"})
    if (key.find(four) != std::string::npos) return 4;
  if (key.find("Mxfp6") != std::string::npos) return 6;
  for (const char* eight : {"Fp8", "Int8", "fp8"})
    if (key.find(eight) != std::string::npos) return 8;
  return std::nullopt;
}

// The canonical weight of one projection, [rows, cols] of values as vLLM loads it, packed or
// transposed as the format stores it: one dim must be one of the two extents and the other
// hold the other extent's values. This ties the layer's sizes to the bytes.
void check_weight_extent(const Check& c, const artifact::Layer& l, const artifact::PackedTensor& t, uint64_t rows, uint64_t cols, const std::string& tw,
                         const std::string& sizes) {
  if (t.canonical_dtype.empty() || !t.per_expert || derived_layout(t.layout).kind == DerivedKind::empty) return;
  const DType dt = *dtype_from_name(t.canonical_dtype);
  const auto v = value_bits(l, dt);
  if (!v || t.canonical_shape.size() < 2) return;
  const uint64_t s = static_cast<uint64_t>(dtype_bits(dt));
  uint64_t a = t.canonical_shape[0], b = 1;
  for (size_t i = 1; i < t.canonical_shape.size(); ++i) b *= t.canonical_shape[i];
  const bool fits =
      (a == rows && b * s == cols * *v) || (b == cols && a * s == rows * *v) || (a == cols && b * s == rows * *v) || (b == rows && a * s == cols * *v);
  c.require(fits, sizes,
            "do not fit " + tw + ".canonical: " + t.canonical_dtype + " " + shape_text(t.canonical_shape) + " holds no [" + std::to_string(rows) + ", " +
                std::to_string(cols) + "] weight of " + std::to_string(*v) + "-bit values");
}

}  // namespace

void validate_artifact(const artifact::Manifest& m, const std::string& artifact_dir, const std::string& manifest_path) {
  const Check c(manifest_path);
  c.require(m.reference == artifact::kReferencePoint, "$.reference",
            "is " + ticked(m.reference) + ", this moepack converts for " + ticked(artifact::kReferencePoint));
  const oracle::Deployment deployment = deployment_from_target_json(m.target, manifest_path);
  const oracle::MoeParallelConfig parallel = oracle::make_moe_parallel_config(deployment.parallel);
  const bool expert_parallel = parallel.ep_size > 1;
  const uint64_t ranks = static_cast<uint64_t>(expert_parallel ? parallel.ep_size : parallel.tp_size);
  c.require(m.layers.size() <= kMaxManifestLayers, "$.layers", "holds " + std::to_string(m.layers.size()) + " layers");

  ArtifactShards shards(m, artifact_dir);
  std::set<std::string> prefixes;
  std::optional<std::vector<int>> rank_ids;  // every layer holds the same ranks
  for (size_t li = 0; li < m.layers.size(); ++li) {
    const artifact::Layer& l = m.layers[li];
    const std::string w = "$.layers[" + std::to_string(li) + "]";
    c.require(prefixes.insert(l.prefix).second, w + ".prefix", "is " + ticked(l.prefix) + ", the prefix of an earlier layer too");
    check_names(c, l, w);
    check_numbers(c, l, w);
    // The ranks: all of the deployment's, in order, or one of them (convert --tp-rank).
    c.require(!l.ranks.empty() && (l.ranks.size() == ranks || l.ranks.size() == 1), w + ".ranks",
              "holds " + std::to_string(l.ranks.size()) + " ranks; the target's deployment has " + std::to_string(ranks));
    std::vector<int> ids;
    for (size_t k = 0; k < l.ranks.size(); ++k) {
      const int id = l.ranks[k].rank;
      c.require(
          static_cast<uint64_t>(id) < ranks && (l.ranks.size() == 1 || static_cast<uint64_t>(id) == k), w + ".ranks[" + std::to_string(k) + "].rank",
          "is " + std::to_string(id) + ", not rank " + (l.ranks.size() == 1 ? "0.." + std::to_string(ranks - 1) : std::to_string(k)) + " of the deployment");
      ids.push_back(id);
    }
    if (rank_ids) c.require(*rank_ids == ids, w + ".ranks", "holds other ranks than the layers before it");
    rank_ids = ids;
    c.require(l.intermediate_size_scope.has_value() == (ranks > 1), w + ".intermediate_size_scope",
              ranks > 1 ? "is missing: with several ranks the sizes are one rank's" : "is set, but the deployment has one rank");
    if (expert_parallel)
      c.require(l.num_experts % ranks == 0, w + ".num_experts",
                "is " + std::to_string(l.num_experts) + ", which does not split over " + std::to_string(ranks) + " expert-parallel ranks");
    const uint64_t local = expert_parallel ? l.num_experts / ranks : l.num_experts;
    const uint64_t n13 = l.gated ? 2 * l.padded_intermediate_size : l.padded_intermediate_size;
    const std::string sizes = "the sizes of " + w + " (padded hidden " + std::to_string(l.padded_hidden_size) + ", padded intermediate " +
                              std::to_string(l.padded_intermediate_size) + (l.gated ? ", gated" : "") + ")";

    std::optional<std::set<std::string>> roles;
    for (size_t k = 0; k < l.ranks.size(); ++k) {
      const artifact::RankTensors& rank = l.ranks[k];
      const std::string rw = w + ".ranks[" + std::to_string(k) + "]";
      std::set<std::string> these;
      for (const auto& [role, t] : rank.tensors) {
        these.insert(role);
        const std::string tw = rw + ".tensors." + role;
        c.require(shards.listed(t.file) && t.file.ends_with(".safetensors"), tw + ".file",
                  "is " + ticked(t.file) + ", no safetensors file the manifest lists in `files`");
        const st::File& f = shards.open(t.file);
        const st::TensorInfo* info = f.find(t.name);
        c.require(info != nullptr, tw + ".name", "is " + ticked(t.name) + ", which " + t.file + " does not hold");
        c.require(t.dtype == dtype_name(info->dtype), tw + ".dtype",
                  "is " + ticked(t.dtype) + ", " + t.file + " holds " + std::string(dtype_name(info->dtype)));
        c.require(t.shape == info->shape, tw + ".shape", "is " + shape_text(t.shape) + ", " + t.file + " holds " + shape_text(info->shape));
        check_canonical(c, t, tw);
        check_layout(c, t, local, tw);
        check_layout_belongs(c, l, role, t, tw);
        c.require(t.name == l.prefix + "." + role, tw + ".name", "is " + ticked(t.name) + ", but the layer's " + role + " is " + ticked(l.prefix + "." + role));
        // The weights under each method's names (FusedMoE, GPTQ/AWQ, compressed-tensors).
        for (const char* suffix : {"weight", "qweight", "weight_packed"}) {
          if (role == std::string("w13_") + suffix) check_weight_extent(c, l, t, n13, l.padded_hidden_size, tw, sizes);
          if (role == std::string("w2_") + suffix) check_weight_extent(c, l, t, l.padded_hidden_size, l.padded_intermediate_size, tw, sizes);
        }
        if ((role == "w13_bias" || role == "w2_bias") && !t.canonical_dtype.empty() && t.per_expert) {
          uint64_t elements = 1;
          for (uint64_t d : t.canonical_shape) elements *= d;
          const uint64_t expected = role == "w13_bias" ? n13 : l.padded_hidden_size;
          c.require(elements == expected, sizes,
                    "do not fit " + tw + ".canonical: " + shape_text(t.canonical_shape) + " holds no bias of " + std::to_string(expected));
        }
      }
      if (roles) c.require(*roles == these, rw + ".tensors", "holds other roles than rank " + std::to_string(l.ranks.front().rank));
      roles = these;
    }
  }
}

namespace {

// The first place two JSON values differ, as a path below `at`.
std::optional<std::string> first_difference(const ojson& got, const ojson& want, const std::string& at, std::string& got_text, std::string& want_text) {
  if (got.is_object() && want.is_object()) {
    for (auto it = want.begin(); it != want.end(); ++it) {
      auto g = got.find(it.key());
      if (g == got.end()) {
        got_text = "missing";
        want_text = it.value().dump();
        return at + "." + it.key();
      }
      if (auto d = first_difference(*g, it.value(), at + "." + it.key(), got_text, want_text)) return d;
    }
    for (auto it = got.begin(); it != got.end(); ++it)
      if (!want.contains(it.key())) {
        got_text = it.value().dump();
        want_text = "no such key";
        return at + "." + it.key();
      }
    return std::nullopt;
  }
  if (got.is_array() && want.is_array() && got.size() == want.size()) {
    for (size_t i = 0; i < got.size(); ++i)
      if (auto d = first_difference(got[i], want[i], at + "[" + std::to_string(i) + "]", got_text, want_text)) return d;
    return std::nullopt;
  }
  if (got == want) return std::nullopt;
  got_text = got.dump();
  want_text = want.dump();
  if (got_text.size() > 200) got_text = got_text.substr(0, 200) + "...";
  if (want_text.size() > 200) want_text = want_text.substr(0, 200) + "...";
  return at;
}

// A layer's manifest entry as JSON without what only the written files can say.
ojson comparable_layer(const artifact::Layer& layer) {
  artifact::Manifest one;
  one.layers.push_back(layer);
  ojson j = artifact::to_json(one)["layers"][0];
  for (auto& rank : j["ranks"])
    for (auto& [role, t] : rank["tensors"].items()) {
      t.erase("file");
      t.erase("xxh3");
    }
  return j;
}

}  // namespace

void validate_artifact_against_source(const artifact::Manifest& m, const std::string& manifest_path, const ckpt::Checkpoint& source,
                                      const std::string& source_path) {
  const Check c(manifest_path);
  const oracle::Deployment deployment = deployment_from_target_json(m.target, manifest_path);
  ConvertRequest request;
  request.target_json = m.target;
  ConversionPlan plan;
  try {
    plan = build_conversion_plan(source, decide_layers(source, deployment), request);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::refused) throw;
    c.fail("$.target", "is a deployment this moepack refuses for the source " + source_path + ": " + e.what());
  }
  c.require(m.source_scheme == plan.source_scheme, "$.source.scheme",
            "is " + ticked(m.source_scheme) + ", the source " + source_path + " is " + ticked(plan.source_scheme));
  c.require(m.layers.size() == plan.layers.size(), "$.layers",
            "holds " + std::to_string(m.layers.size()) + " layers, the source " + source_path + " has " + std::to_string(plan.layers.size()) + " MoE layers");
  for (size_t li = 0; li < m.layers.size(); ++li) {
    const LayerPlan& lp = plan.layers[li];
    artifact::Layer expected = lp.manifest;
    expected.ranks.clear();
    for (const RankPlan& rp : lp.ranks) {
      // One rank of several (convert --tp-rank) is compared with that rank's plan.
      if (m.layers[li].ranks.size() == 1 && lp.ranks.size() > 1 && rp.rank != m.layers[li].ranks.front().rank) continue;
      artifact::RankTensors rt;
      rt.rank = rp.rank;
      for (const PackedTensorPlan& t : rp.tensors) {
        rt.tensors.emplace(t.role, manifest_entry(t));
      }
      expected.ranks.push_back(std::move(rt));
    }
    // `vllm` was added to moepack/1 later; a manifest written before it is compared without it.
    if (m.layers[li].vllm.is_null()) expected.vllm = nullptr;
    std::string got_text, want_text;
    const std::string w = "$.layers[" + std::to_string(li) + "]";
    if (auto where = first_difference(comparable_layer(m.layers[li]), comparable_layer(expected), w, got_text, want_text))
      c.fail(*where, "is " + got_text + ", but converting the source " + source_path + " for the recorded target gives " + want_text);
  }
}

}  // namespace moepack::runtime
