// Layer discovery, validation against config.json and per-expert canonical params, shared by
// every per-expert family. Family-specific knowledge lives in the family files as data
// (`ExpertRecipe`); this file only interprets it.
#include "formats/checkpoints/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <regex>
#include <set>

#include <fnmatch.h>

#include "formats/safetensors/strict_json.h"
#include "lib/core/codecs.h"
#include "lib/core/error.h"
#include "lib/core/natural_order.h"

namespace moepack::ckpt {
namespace fs = std::filesystem;

std::string_view family_name(Family f) {
  switch (f) {
    case Family::gpt_oss: return "gpt-oss";
    case Family::compressed_tensors: return "compressed-tensors";
    case Family::modelopt: return "modelopt";
    case Family::quark: return "quark";
    case Family::gptq: return "gptq";
    case Family::awq: return "awq";
    case Family::fp8: return "fp8";
    case Family::deepseek_v4: return "deepseek-v4";
    case Family::unquantized: return "unquantized";
  }
  return "unquantized";
}

std::string_view naming_name(ExpertNaming n) {
  switch (n) {
    case ExpertNaming::hf: return "per-expert gate_proj/up_proj/down_proj";
    case ExpertNaming::mixtral: return "per-expert w1/w3/w2 (Mixtral)";
    case ExpertNaming::deepseek_native: return "per-expert w1/w3/w2 (DeepSeek native)";
    case ExpertNaming::hf_no_gate: return "per-expert up_proj/down_proj (non-gated)";
    case ExpertNaming::per_expert_gate_up: return "per-expert gate_up_proj/down_proj (gate/up fused)";
    case ExpertNaming::gpt_oss_fused: return "fused gate_up_proj/down_proj (gpt-oss)";
    case ExpertNaming::fused_3d: return "fused 3-D gate_up_proj/down_proj";
  }
  return "";
}

std::string_view w13_order_name(W13Order o) { return o == W13Order::interleaved ? "interleaved" : "gate_then_up"; }

const MoeLayer* Checkpoint::find_layer(const std::string& prefix) const {
  for (const auto& l : layers)
    if (l.prefix == prefix) return &l;
  return nullptr;
}

namespace detail {

// ---- JSON helpers ----------------------------------------------------------------------------

const nlohmann::json* find_key(const nlohmann::json& obj, const std::string& key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string json_string(const nlohmann::json& obj, const std::string& key, const std::string& file, const std::string& fallback) {
  const auto* v = find_key(obj, key);
  if (!v) return fallback;
  if (!v->is_string()) throw_bad_input(file, "", "`" + key + "` must be a string, got " + v->dump());
  return v->get<std::string>();
}

int64_t json_int(const nlohmann::json& obj, const std::string& key, const std::string& file, int64_t fallback) {
  const auto* v = find_key(obj, key);
  if (!v) return fallback;
  if (v->is_number_integer()) return v->get<int64_t>();
  // Some exporters write whole numbers as floats (128.0).
  if (v->is_number_float()) {
    double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) return static_cast<int64_t>(d);
  }
  throw_bad_input(file, "", "`" + key + "` must be an integer, got " + v->dump());
}

bool json_bool(const nlohmann::json& obj, const std::string& key, const std::string& file, bool fallback) {
  const auto* v = find_key(obj, key);
  if (!v) return fallback;
  if (!v->is_boolean()) throw_bad_input(file, "", "`" + key + "` must be true or false, got " + v->dump());
  return v->get<bool>();
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool regex_prefix_match(const std::string& pattern, const std::string& text, const std::string& file) {
  try {
    std::regex re(pattern, std::regex::ECMAScript);
    return std::regex_search(text, re, std::regex_constants::match_continuous);
  } catch (const std::regex_error& e) {
    throw_bad_input(file, "", "invalid regular expression `" + pattern + "`: " + e.what());
  }
}

bool fnmatch_glob(const std::string& pattern, const std::string& text) { return ::fnmatch(pattern.c_str(), text.c_str(), 0) == 0; }

// ---- shared recipes -----------------------------------------------------------------------------

namespace {
uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
}  // namespace

std::vector<SourceTensorRule> fp4_weight_rules(const std::string& weight_suffix, DType scale_dtype, uint64_t group) {
  SourceTensorRule w{weight_suffix, {DType::U8}, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i / 2}; }};
  w.param = weight_suffix;
  SourceTensorRule s{"weight_scale", {scale_dtype}, [group](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, ceil_div(i, group)}; }};
  s.param = "weight_scale";
  return {w, s};
}

SourceTensorRule fp8_weight_rule(const std::string& suffix) {
  SourceTensorRule w{suffix, {DType::F8_E4M3}, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i}; }};
  w.param = suffix;
  return w;
}

SourceTensorRule scalar_rule(const std::string& suffix, Assemble w13, bool required) {
  SourceTensorRule r{suffix, {DType::F32, DType::BF16, DType::F16}, nullptr, required};
  r.param = suffix;
  r.w13 = w13;
  return r;
}

SourceTensorRule block_scale_rule(const std::string& suffix, uint64_t bn, uint64_t bk, std::vector<DType> dtypes) {
  SourceTensorRule r{suffix, std::move(dtypes), [bn, bk](uint64_t o, uint64_t i) { return std::vector<uint64_t>{ceil_div(o, bn), ceil_div(i, bk)}; }};
  r.param = suffix;
  return r;
}

}  // namespace detail

namespace {

// The projections a per-expert naming stores, and which part of w13/w2 each one is.
enum class ProjPart { gate, up, w13_whole, down };
struct Projection {
  const char* name;
  ProjPart part;
};
std::vector<Projection> projections(ExpertNaming n) {
  switch (n) {
    case ExpertNaming::hf: return {{"gate_proj", ProjPart::gate}, {"up_proj", ProjPart::up}, {"down_proj", ProjPart::down}};
    case ExpertNaming::hf_no_gate: return {{"up_proj", ProjPart::w13_whole}, {"down_proj", ProjPart::down}};
    case ExpertNaming::per_expert_gate_up: return {{"gate_up_proj", ProjPart::w13_whole}, {"down_proj", ProjPart::down}};
    default: return {{"w1", ProjPart::gate}, {"w3", ProjPart::up}, {"w2", ProjPart::down}};
  }
}

// Logical (out, in) of a projection: w13 rows are 2I when gate and up are stored together in a
// gated layer, I for a single half.
std::pair<uint64_t, uint64_t> projection_dims(ProjPart part, const MoeLayer& layer) {
  const uint64_t H = layer.hidden_size, I = layer.intermediate_size;
  switch (part) {
    case ProjPart::gate:
    case ProjPart::up: return {I, H};
    case ProjPart::w13_whole: return {layer.gated ? 2 * I : I, H};
    case ProjPart::down: return {H, I};
  }
  return {0, 0};
}

bool is_scalar_shape(const std::vector<uint64_t>& s) { return s.empty() || (s.size() == 1 && s[0] == 1); }

std::string dtype_list(const std::vector<DType>& ds) {
  std::string out;
  for (size_t i = 0; i < ds.size(); ++i) out += (i ? "/" : "") + std::string(dtype_name(ds[i]));
  return out;
}

// Layer discovery: the per-expert name grammar `<prefix>.experts.<E>.<proj>.<param>` and the
// gpt-oss fused `<prefix>.experts.{gate_up_proj,down_proj}_{blocks,scales,bias}`. Views point
// into the tensor name (owned by the parsed header), so discovery allocates nothing per tensor.
struct ParsedName {
  std::string_view prefix;  // up to and including "experts"
  bool fused = false;
  uint64_t expert = 0;
  std::string_view proj;
  std::string_view param;
};

std::optional<ParsedName> parse_expert_name(std::string_view name, const std::string& file) {
  static constexpr std::string_view marker = ".experts.";
  size_t p = name.rfind(marker);
  if (p == std::string_view::npos) return std::nullopt;
  ParsedName out;
  out.prefix = name.substr(0, p + marker.size() - 1);
  std::string_view rest = name.substr(p + marker.size());
  if (rest.empty()) return std::nullopt;
  if (std::isdigit(static_cast<unsigned char>(rest[0]))) {
    size_t dot = rest.find('.');
    if (dot == std::string_view::npos) return std::nullopt;
    std::string_view digits = rest.substr(0, dot);
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) return std::nullopt;
    if (digits.size() > 9) throw_bad_input(file, std::string(name), "expert index is implausibly large");
    for (char c : digits) out.expert = out.expert * 10 + static_cast<uint64_t>(c - '0');
    std::string_view tail = rest.substr(dot + 1);
    size_t dot2 = tail.find('.');
    if (dot2 == std::string_view::npos) return std::nullopt;
    out.proj = tail.substr(0, dot2);
    out.param = tail.substr(dot2 + 1);
    static constexpr std::string_view projs[] = {"gate_proj", "up_proj", "down_proj", "gate_up_proj", "w1", "w2", "w3"};
    if (std::find(std::begin(projs), std::end(projs), out.proj) == std::end(projs)) return std::nullopt;  // e.g. a per-expert router: pass-through
    return out;
  }
  static constexpr std::string_view fused[] = {"gate_up_proj", "down_proj"};
  for (auto f : fused) {
    if (rest.substr(0, f.size()) == f) {
      out.fused = true;
      out.proj = f;
      out.param = rest.substr(f.size());
      return out;
    }
  }
  return std::nullopt;
}

int64_t layer_index_of(const std::string& prefix) {
  // The last "layers.<n>." in the prefix ("model.layers.7.mlp.experts" -> 7).
  static const std::string key = "layers.";
  size_t p = prefix.rfind(key);
  while (p != std::string::npos) {
    size_t s = p + key.size();
    size_t e = s;
    while (e < prefix.size() && std::isdigit(static_cast<unsigned char>(prefix[e]))) ++e;
    if (e > s && e - s <= 9 && (p == 0 || prefix[p - 1] == '.')) return std::stoll(prefix.substr(s, e - s));
    if (p == 0) break;
    p = prefix.rfind(key, p - 1);
  }
  return -1;
}

struct ScannedTensor {
  ParsedName parsed;
  const st::TensorInfo* info;
  const st::File* file;
};

struct LayerScan {
  std::vector<ScannedTensor> tensors;
  bool fused = false;
  bool per_expert = false;
  std::set<std::string_view> projs;
  uint64_t max_expert = 0;
};

// The shape (one expert) a rule's assembled param has.
std::vector<uint64_t> assembled_shape(const SourceTensorRule& r, std::vector<uint64_t> gate_or_down, bool is_w13) {
  if (r.transpose && gate_or_down.size() == 2) std::swap(gate_or_down[0], gate_or_down[1]);
  if (!r.shape) gate_or_down.clear();
  if (!is_w13) return gate_or_down;
  switch (r.w13) {
    case Assemble::rows:
      if (!gate_or_down.empty()) gate_or_down[0] *= 2;
      break;
    case Assemble::cols:
      if (gate_or_down.size() >= 2) gate_or_down[1] *= 2;
      else if (!gate_or_down.empty()) gate_or_down[0] *= 2;
      break;
    case Assemble::pair: gate_or_down = {2}; break;
    case Assemble::same:
    case Assemble::last_loaded: break;
  }
  return gate_or_down;
}

// A w13 stored whole (gate_up fused, or the single up projection of a non-gated layer) needs no
// assembly; a per-shard scalar (Assemble::pair) becomes a one-entry vector, as vLLM allocates one
// shard for it.
std::vector<uint64_t> whole_w13_shape(const SourceTensorRule& r, std::vector<uint64_t> shape, bool gated) {
  if (r.w13 == Assemble::pair) return {gated ? uint64_t{2} : uint64_t{1}};
  return assembled_shape(r, std::move(shape), false);
}

// Every tensor of the layer placed in an (expert, projection, rule) table, indexed
// (expert * P + projection) * R + rule. Every tensor must be one the recipe knows: anything else
// means the scheme was mis-detected or the checkpoint is inconsistent, and a converter would
// silently drop it.
std::vector<const ScannedTensor*> place_expert_tensors(const MoeLayer& layer, const ExpertRecipe& recipe, const std::vector<Projection>& projs,
                                                       const std::vector<ScannedTensor>& tensors) {
  const size_t P = projs.size(), R = recipe.tensors.size();
  std::map<std::string_view, size_t> rule_of;
  for (size_t ri = 0; ri < R; ++ri) rule_of.emplace(recipe.tensors[ri].suffix, ri);
  std::vector<const ScannedTensor*> slots(static_cast<size_t>(layer.num_experts) * P * R, nullptr);
  for (const auto& t : tensors) {
    const std::string& name = t.info->name;
    const std::string& file = t.file->path();
    if (t.parsed.fused) throw_bad_input(file, name, "fused expert tensor in a per-expert layer `" + layer.prefix + "`");
    size_t proj = P;
    for (size_t p = 0; p < P; ++p)
      if (t.parsed.proj == projs[p].name) proj = p;
    if (proj == P) throw_bad_input(file, name, "projection `" + std::string(t.parsed.proj) + "` does not belong to the " + std::string(naming_name(layer.naming)) + " naming of this layer");
    auto rule = rule_of.find(t.parsed.param);
    if (rule == rule_of.end()) {
      std::string expected;
      for (const auto& [k, _] : rule_of) expected += (expected.empty() ? "" : ", ") + std::string(k);
      throw_bad_input(file, name, "unexpected expert tensor for scheme `" + layer.quant.scheme + "` (expected parameters: " + expected + ")");
    }
    if (t.parsed.expert >= layer.num_experts)
      throw_bad_input(file, name, "expert index " + std::to_string(t.parsed.expert) + " is out of range: the config declares " + std::to_string(layer.num_experts) + " experts");
    slots[(t.parsed.expert * P + proj) * R + rule->second] = &t;
  }
  return slots;
}

// The summary of one expert, listed as w13_X, w2_X in recipe order: w13 from the first
// projection (gate, or the whole w13), w2 from the down projection (the last).
void summarize_expert_params(MoeLayer& layer, const ExpertRecipe& recipe, const std::vector<Projection>& projs,
                             const std::vector<const ScannedTensor*>& slots) {
  const size_t P = projs.size(), R = recipe.tensors.size();
  for (size_t ri = 0; ri < R; ++ri) {
    const auto& r = recipe.tensors[ri];
    for (size_t p : {size_t{0}, P - 1}) {
      const ScannedTensor* t = slots[p * R + ri];
      if (!t) continue;
      const bool is_w13 = p == 0;
      std::vector<uint64_t> shape = projs[p].part == ProjPart::w13_whole ? whole_w13_shape(r, t->info->shape, layer.gated) : assembled_shape(r, t->info->shape, is_w13);
      layer.params.push_back({std::string(is_w13 ? "w13_" : "w2_") + r.param, r.canonical_dtype.value_or(t->info->dtype), std::move(shape)});
    }
  }
}

// Checks every expert's tensors against the recipe and the config sizes; fills the summary.
// Tensors are placed in an (expert, projection, rule) table first, so the check is one pass
// without building names (DeepSeek-V3 has ~90k expert tensors).
void validate_per_expert_layer(const st::ShardSet& shards, MoeLayer& layer, const ExpertRecipe& recipe, const std::vector<ScannedTensor>& tensors) {
  const std::vector<Projection> projs = projections(layer.naming);
  const size_t P = projs.size();
  const uint64_t H = layer.hidden_size, I = layer.intermediate_size;
  const size_t R = recipe.tensors.size();
  const std::vector<const ScannedTensor*> slots = place_expert_tensors(layer, recipe, projs, tensors);
  // Expected shapes depend only on (projection, rule).
  std::vector<std::vector<uint64_t>> want(P * R);
  for (size_t p = 0; p < P; ++p) {
    auto [out, in] = projection_dims(projs[p].part, layer);
    for (size_t ri = 0; ri < R; ++ri)
      if (recipe.tensors[ri].shape) want[p * R + ri] = recipe.tensors[ri].shape(out, in);
  }
  const std::string root = shards.root();
  for (uint64_t e = 0; e < layer.num_experts; ++e) {
    for (size_t p = 0; p < P; ++p) {
      for (size_t ri = 0; ri < R; ++ri) {
        const auto& r = recipe.tensors[ri];
        const ScannedTensor* t = slots[(e * P + p) * R + ri];
        if (!t) {
          std::string name = layer.prefix + "." + std::to_string(e) + "." + projs[p].name + "." + r.suffix;
          if (!r.required) {
            // Optional tensors are all-or-nothing per layer (vLLM loads them into one param).
            if (e > 0 && slots[p * R + ri]) throw_bad_input(root, name, "missing: present for expert 0 but not for expert " + std::to_string(e));
            continue;
          }
          throw_bad_input(root, name, "missing tensor: scheme `" + layer.quant.scheme + "` needs `" + r.suffix + "` for every expert (expert " + std::to_string(e) + " of " +
                                          std::to_string(layer.num_experts) + ")");
        }
        if (!r.required && e > 0 && !slots[p * R + ri])
          throw_bad_input(t->file->path(), t->info->name, "present for expert " + std::to_string(e) + " but not for expert 0");
        const auto& info = *t->info;
        if (std::find(r.dtypes.begin(), r.dtypes.end(), info.dtype) == r.dtypes.end())
          throw_bad_input(t->file->path(), info.name, "dtype " + std::string(dtype_name(info.dtype)) + " does not match scheme `" + layer.quant.scheme + "` (expected " + dtype_list(r.dtypes) + ")");
        if (!r.shape) {
          if (!is_scalar_shape(info.shape)) throw_bad_input(t->file->path(), info.name, "shape " + shape_string(info.shape) + ": expected a per-tensor scalar ([] or [1])");
        } else if (info.shape != want[p * R + ri]) {
          const ProjPart part = projs[p].part;
          std::string dims = part == ProjPart::down ? "hidden_size " + std::to_string(H) + " x intermediate " + std::to_string(I)
                             : part == ProjPart::w13_whole && layer.gated ? "2 x intermediate " + std::to_string(I) + " (gate and up) x hidden_size " + std::to_string(H)
                                                                          : "intermediate " + std::to_string(I) + " x hidden_size " + std::to_string(H);
          throw_bad_input(t->file->path(), info.name, "shape " + shape_string(info.shape) + " does not match config.json: expected " + shape_string(want[p * R + ri]) + " for " + dims);
        }
        if (r.param == "bias") layer.has_bias = true;
      }
    }
  }
  summarize_expert_params(layer, recipe, projs, slots);
}

// The stable scheme id of one layer (see Checkpoint::scheme_id).
std::string layer_scheme_id(const LayerQuant& q) {
  if (!q.quantized()) return q.scheme;
  if (!q.quark_ocp_mx_scheme.empty()) return q.quark_ocp_mx_scheme;
  const MethodChoice& m = q.method;
  const std::string& f = m.oracle_family;
  if (f == "nvfp4") return m.activation_key.empty() ? "nvfp4a16" : "nvfp4";
  if (f == "fp8") {
    if (m.weight_key.find("Block") != std::string::npos) return "fp8-block";
    if (m.weight_key.find("Channel") != std::string::npos) return "fp8-channel";
    return "fp8-tensor";
  }
  if (f == "wna16") return "w" + std::to_string(q.weight_bits) + "a16";
  if (f == "int8") return "w8a8-int8";
  if (f == "w4a8_int8") return "w4a8-int8";
  if (f == "w4a8") return "w4a8-fp8";
  return f;  // mxfp4, mxfp8
}

std::string scheme_id_of(const Checkpoint& ck) {
  if (ck.layers.empty()) return "none";
  const MoeLayer* chosen = &ck.layers.front();
  for (const auto& l : ck.layers)
    if (l.quant.quantized()) {
      chosen = &l;
      break;
    }
  return std::string(family_name(ck.family)) + "-" + layer_scheme_id(chosen->quant);
}

// Which naming a discovered layer uses, from its tensor names alone.
ExpertNaming naming_of(const LayerScan& scan, const std::string& prefix) {
  const ScannedTensor& first = scan.tensors.front();
  if (scan.fused && scan.per_expert) throw_bad_input(first.file->path(), first.info->name, "layer `" + prefix + "` mixes fused and per-expert tensors");
  if (scan.fused) {
    // gpt-oss MXFP4 stores FP4 blocks and E8M0 scales; every other fused producer stores the
    // weight itself as a 3-D [E, in, out] tensor.
    for (const auto& t : scan.tensors)
      if (t.parsed.param == "_blocks" || t.parsed.param == "_scales") return ExpertNaming::gpt_oss_fused;
    return ExpertNaming::fused_3d;
  }
  const bool gate = scan.projs.count("gate_proj") > 0, up = scan.projs.count("up_proj") > 0, down = scan.projs.count("down_proj") > 0;
  const bool gate_up = scan.projs.count("gate_up_proj") > 0;
  const bool numbered = scan.projs.count("w1") || scan.projs.count("w2") || scan.projs.count("w3");
  if ((gate || up || down || gate_up) && numbered) throw_bad_input(first.file->path(), first.info->name, "layer `" + prefix + "` mixes gate_proj/up_proj/down_proj and w1/w2/w3 names");
  if (gate_up) {
    if (gate || up) throw_bad_input(first.file->path(), first.info->name, "layer `" + prefix + "` has both a fused gate_up_proj and separate gate_proj/up_proj");
    return ExpertNaming::per_expert_gate_up;
  }
  if (up && !gate) return ExpertNaming::hf_no_gate;
  if (gate || up || down) return ExpertNaming::hf;
  return prefix.find("block_sparse_moe") != std::string::npos ? ExpertNaming::mixtral : ExpertNaming::deepseek_native;
}

// The shards (validated headers), their total size and config.json when there is one: what
// every later step reads.
Checkpoint open_files(const std::string& path) {
  Checkpoint ck;
  ck.path = path;
  ck.shards = std::make_unique<st::ShardSet>(path);
  const st::ShardSet& shards = *ck.shards;
  for (const auto& f : shards.files())
    for (const auto& t : f->header().tensors) ck.total_bytes += t.num_bytes();
  if (!shards.unindexed().empty())
    ck.notes.push_back(std::to_string(shards.unindexed().size()) + " tensor(s) present in shards but not in model.safetensors.index.json (ignored, as vLLM does), e.g. `" +
                       shards.unindexed().front() + "`");

  // config.json lives beside the shards; for a single file, in its directory.
  std::string cfg = (fs::path(shards.root()) / "config.json").string();
  if (fs::exists(cfg)) {
    ck.config_path = cfg;
    ck.config = read_strict_json_file(cfg);
    if (!ck.config.is_object()) throw_bad_input(cfg, "", "config.json is not a JSON object");
  }
  return ck;
}

// The MoE layers, discovered from tensor names alone: expert tensors grouped by layer prefix.
std::map<std::string_view, LayerScan> scan_expert_tensors(const st::ShardSet& shards) {
  std::map<std::string_view, LayerScan> scans;
  for (const auto& f : shards.files()) {
    for (const auto& t : f->header().tensors) {
      auto parsed = parse_expert_name(t.name, f->path());
      if (!parsed) continue;
      auto ref = shards.find(t.name);
      if (!ref || ref->file != f.get()) continue;  // not the copy the index points to
      auto& s = scans[parsed->prefix];
      s.tensors.push_back({*parsed, &t, f.get()});
      if (parsed->fused) {
        s.fused = true;
      } else {
        s.per_expert = true;
        s.projs.insert(parsed->proj);
        s.max_expert = std::max(s.max_expert, parsed->expert);
      }
    }
  }
  return scans;
}

// What a layer's tensor names say: prefix, index, tensors (sorted) and their bytes.
MoeLayer named_layer(const std::string& prefix, const LayerScan& scan) {
  MoeLayer layer;
  layer.prefix = prefix;
  layer.layer_index = layer_index_of(prefix);
  layer.tensors.reserve(scan.tensors.size());
  for (const auto& t : scan.tensors) {
    layer.tensors.push_back(t.info->name);
    layer.source_bytes += t.info->num_bytes();
  }
  std::sort(layer.tensors.begin(), layer.tensors.end());
  return layer;
}

void sort_layers(Checkpoint& ck) {
  std::sort(ck.layers.begin(), ck.layers.end(), [](const MoeLayer& a, const MoeLayer& b) {
    return std::tie(a.layer_index, a.prefix) < std::tie(b.layer_index, b.prefix);
  });
}

// A dense model or a non-MoE shard is still described: its facts are best-effort.
void describe_without_moe_layers(Checkpoint& ck) {
  if (ck.config.is_object()) ck.facts = detail::read_model_facts(ck.config, *ck.shards, ck.config_path);
  ck.has_config = ck.config.is_object();
  ck.scheme = "no MoE layers";
  ck.scheme_id = ck.has_config ? "none" : "unknown";
}

// A lone file (or a directory without config.json): what the names say, nothing more. The
// quantization scheme, the expert sizes and the family live in config.json.
void describe_without_config(Checkpoint& ck, const std::map<std::string_view, LayerScan>& scans) {
  ck.has_config = false;
  ck.scheme = "unknown (no config.json)";
  ck.scheme_id = "unknown";
  for (const auto& [prefix_view, scan] : scans) {
    MoeLayer layer = named_layer(std::string(prefix_view), scan);
    layer.naming = naming_of(scan, layer.prefix);
    layer.gated = layer.naming != ExpertNaming::hf_no_gate;
    layer.num_experts = scan.fused ? 0 : scan.max_expert + 1;
    if (scan.fused)
      for (const auto& t : scan.tensors)
        if (!t.info->shape.empty()) layer.num_experts = std::max(layer.num_experts, t.info->shape[0]);
    layer.quant.scheme = "unknown";
    ck.layers.push_back(std::move(layer));
  }
  sort_layers(ck);
  ck.notes.push_back("no config.json beside " + ck.shards->root() + ": family, scheme and expert shapes are unknown (plan and convert need it)");
}

// The quantization config and the file it came from: config.json's block, else the legacy
// side files (null and "" when there is none).
std::pair<nlohmann::json, std::string> read_quantization_config(const Checkpoint& ck) {
  if (const auto* q = detail::find_key(ck.config, "quantization_config")) return {*q, ck.config_path};
  if (const auto* c = detail::find_key(ck.config, "compression_config")) return {*c, ck.config_path};  // compressed-tensors before the rename
  for (const char* side : {"hf_quant_config.json", "quantize_config.json", "quant_config.json"}) {
    std::string p = (fs::path(ck.shards->root()) / side).string();
    if (fs::exists(p)) return {read_strict_json_file(p), p};
  }
  return {nullptr, ""};
}

// One MoE layer of a checkpoint with a config: its naming, sizes, the family's quantization
// and recipe, every tensor validated against them, and the summary of one expert's params.
MoeLayer read_layer(Checkpoint& ck, const detail::FamilyRules& rules, const std::string& prefix, const LayerScan& scan) {
  const st::ShardSet& shards = *ck.shards;
  MoeLayer layer = named_layer(prefix, scan);
  const std::string& first_file = scan.tensors.front().file->path();
  layer.naming = naming_of(scan, prefix);
  // Non-gated experts are named so (no gate projection) and need an activation without a
  // multiply; a gated model missing its gate tensors is a broken checkpoint, not a new layout.
  layer.gated = layer.naming != ExpertNaming::hf_no_gate;
  if (!layer.gated && !ck.facts.activation.ends_with("_no_mul"))
    throw_bad_input(first_file, prefix + ".0.gate_proj", "missing gate_proj: the experts have only up_proj/down_proj, but the model's activation `" + ck.facts.activation +
                                                            "` multiplies gate and up (non-gated experts need e.g. Nemotron-H's `mlp_hidden_act: relu2`)");
  layer.hidden_size = ck.facts.moe_hidden_size ? ck.facts.moe_hidden_size : ck.facts.hidden_size;
  layer.intermediate_size = ck.facts.moe_intermediate_size;
  if (layer.hidden_size == 0) throw_bad_input(ck.config_path, "", "`hidden_size` is missing: needed to check the expert shapes");
  if (layer.intermediate_size == 0)
    throw_bad_input(ck.config_path, "", "the expert width (`moe_intermediate_size` or `intermediate_size`) is missing: needed to check the expert shapes");
  layer.quant = rules.layer_quant(prefix);
  layer.recipe = rules.recipe(layer.quant, layer.naming);
  if (layer.naming == ExpertNaming::gpt_oss_fused) {
    detail::validate_gpt_oss_layer(shards, layer, ck.facts);
  } else if (layer.naming == ExpertNaming::fused_3d) {
    detail::validate_fused_3d_layer(shards, layer, ck.facts);
  } else {
    uint64_t found = scan.max_expert + 1;
    layer.num_experts = ck.facts.num_experts ? ck.facts.num_experts : found;
    if (found > layer.num_experts)
      throw_bad_input(first_file, prefix + "." + std::to_string(scan.max_expert), "expert index " + std::to_string(scan.max_expert) + " is out of range: config.json declares " +
                                                                                     std::to_string(layer.num_experts) + " experts");
    validate_per_expert_layer(shards, layer, layer.recipe, scan.tensors);
  }
  // gpt-oss' experts have biases by architecture: vLLM allocates them (zeros where a
  // producer dropped the tensors), so the oracle must see them either way.
  if (ck.facts.has_bias) layer.has_bias = true;
  if (layer.has_bias) ck.facts.has_bias = true;
  layer.recipe.w2_bias_first_rank_only = ck.facts.model_type == "gpt_oss";
  return layer;
}

// The family's rules (detected from config.json and the quantization config), then every layer.
void describe_with_config(Checkpoint& ck, const std::map<std::string_view, LayerScan>& scans) {
  auto [quant, quant_source] = read_quantization_config(ck);
  if (!quant.is_null() && !quant.is_object()) throw_bad_input(quant_source, "", "the quantization config is not a JSON object");
  ck.quant_config_source = quant_source;

  ck.facts = detail::read_model_facts(ck.config, *ck.shards, ck.config_path);
  detail::DetectInput in{ck.config, quant, quant_source, *ck.shards};
  auto rules = detail::detect_family(in);
  ck.family = rules->family();
  ck.scheme = rules->scheme();

  for (const auto& [prefix_view, scan] : scans) ck.layers.push_back(read_layer(ck, *rules, std::string(prefix_view), scan));
  sort_layers(ck);
  for (const auto& l : ck.layers)
    if (!l.quant.unsupported.empty()) {
      ck.notes.push_back("vLLM refuses `" + l.prefix + "` (and maybe more layers): " + l.quant.unsupported);
      break;
    }
  ck.scheme_id = scheme_id_of(ck);
}

}  // namespace

Checkpoint open_checkpoint(const std::string& path) {
  Checkpoint ck = open_files(path);
  const std::map<std::string_view, LayerScan> scans = scan_expert_tensors(*ck.shards);
  if (scans.empty()) describe_without_moe_layers(ck);
  else if (!ck.config.is_object()) describe_without_config(ck, scans);
  else describe_with_config(ck, scans);
  return ck;
}

// ---- canonical params -----------------------------------------------------------------------

namespace {

struct Source {
  std::string name;
  std::string file;  // the shard holding it, for messages
  DType dtype;
  std::vector<uint64_t> shape;
  std::vector<uint8_t> bytes;
};

// A checked read, not a view into the mapping: the shard may be truncated while we run, and
// that must be an I/O error naming it, never SIGBUS.
Source load_source(const st::ShardSet& shards, const std::string& name) {
  auto ref = shards.find(name);
  if (!ref) throw_bad_input(shards.root(), name, "missing tensor");
  Source s{name, ref->file->path(), ref->info->dtype, ref->info->shape, ref->read_all()};
  if (is_scalar_shape(s.shape)) s.shape.clear();
  return s;
}

uint64_t element_bytes(const Source& s) {
  int bits = dtype_bits(s.dtype);
  if (bits % 8) throw_bad_input(s.file, s.name, "sub-byte dtype cannot be transposed");
  return static_cast<uint64_t>(bits / 8);
}

OwnedTensor as_owned(Source s, bool transpose) {
  if (!transpose || s.shape.size() != 2) {
    OwnedTensor t;
    t.dtype = s.dtype;
    t.shape = std::move(s.shape);
    t.bytes = std::move(s.bytes);
    return t;
  }
  const uint64_t rows = s.shape[0], cols = s.shape[1], eb = element_bytes(s);
  OwnedTensor t(s.dtype, {cols, rows});
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t c = 0; c < cols; ++c) std::memcpy(&t.bytes[(c * rows + r) * eb], &s.bytes[(r * cols + c) * eb], eb);
  return t;
}

// `gate_file` holds `gate_name`; every refusal names both (docs/CLI.md: messages name the file).
OwnedTensor assemble_w13(const SourceTensorRule& r, OwnedTensor gate, OwnedTensor up, const std::string& gate_file, const std::string& gate_name) {
  if (gate.dtype != up.dtype) throw_bad_input(gate_file, gate_name, "gate and up `" + r.suffix + "` have different dtypes");
  switch (r.w13) {
    case Assemble::rows: {
      if (gate.shape.empty() || gate.shape.size() != up.shape.size() || !std::equal(gate.shape.begin() + 1, gate.shape.end(), up.shape.begin() + 1))
        throw_bad_input(gate_file, gate_name, "gate and up `" + r.suffix + "` cannot be stacked: shapes " + shape_string(gate.shape) + " and " + shape_string(up.shape));
      OwnedTensor out;
      out.dtype = gate.dtype;
      out.shape = gate.shape;
      out.shape[0] += up.shape[0];
      out.bytes = std::move(gate.bytes);
      out.bytes.insert(out.bytes.end(), up.bytes.begin(), up.bytes.end());
      return out;
    }
    case Assemble::cols: {
      // 1-D params (biases) have one axis: joining "columns" is stacking.
      if (gate.shape.size() == 1) {
        SourceTensorRule rows_rule = r;
        rows_rule.w13 = Assemble::rows;
        return assemble_w13(rows_rule, std::move(gate), std::move(up), gate_file, gate_name);
      }
      if (gate.shape.size() != 2 || up.shape.size() != 2 || gate.shape[0] != up.shape[0])
        throw_bad_input(gate_file, gate_name, "gate and up `" + r.suffix + "` cannot be joined column-wise: shapes " + shape_string(gate.shape) + " and " + shape_string(up.shape));
      const uint64_t rows = gate.shape[0];
      const size_t gb = rows ? gate.bytes.size() / rows : 0, ub = rows ? up.bytes.size() / rows : 0;
      OwnedTensor out;
      out.dtype = gate.dtype;
      out.shape = {rows, gate.shape[1] + up.shape[1]};
      out.bytes.resize(gate.bytes.size() + up.bytes.size());
      for (uint64_t row = 0; row < rows; ++row) {
        std::memcpy(&out.bytes[row * (gb + ub)], &gate.bytes[row * gb], gb);
        std::memcpy(&out.bytes[row * (gb + ub) + gb], &up.bytes[row * ub], ub);
      }
      return out;
    }
    case Assemble::pair: {
      OwnedTensor out;
      out.dtype = gate.dtype;
      out.shape = {2};
      out.bytes = std::move(gate.bytes);
      out.bytes.insert(out.bytes.end(), up.bytes.begin(), up.bytes.end());
      return out;
    }
    case Assemble::same:
      if (gate.bytes != up.bytes || gate.shape != up.shape)
        throw_bad_input(gate_file, gate_name, "gate and up `" + r.suffix + "` differ, but vLLM keeps one value for both projections");
      return gate;
    case Assemble::last_loaded: throw_internal("last_loaded params are chosen before assembly");
  }
  return gate;
}

// Of two tensors loaded into the same slot, the one vLLM's loader meets last.
const std::string& loaded_last(const st::ShardSet& shards, const std::string& gate_name, const std::string& up_name) {
  auto g = shards.find(gate_name), u = shards.find(up_name);
  if (!g || !u) throw_bad_input(shards.root(), g ? up_name : gate_name, "missing tensor");
  const std::string gate_file = std::filesystem::path(g->file->path()).filename().string();
  const std::string up_file = std::filesystem::path(u->file->path()).filename().string();
  // Across shards the loader goes by file name in natural order, as vLLM sorts shards.
  if (gate_file != up_file) return natural_less(gate_file, up_file) ? up_name : gate_name;
  return gate_name < up_name ? up_name : gate_name;
}

}  // namespace

ExpertParams read_expert_params(const Checkpoint& ckpt, const MoeLayer& layer, uint64_t expert, std::string_view only_param) {
  if (!ckpt.has_config) throw Error(ErrorKind::bad_input, ckpt.path + ": no config.json, so the experts of `" + layer.prefix + "` cannot be read as canonical params");
  if (expert >= layer.num_experts)
    throw Error(ErrorKind::usage, "expert " + std::to_string(expert) + " is out of range for `" + layer.prefix + "` (" + std::to_string(layer.num_experts) + " experts)");
  const st::ShardSet& shards = *ckpt.shards;
  if (layer.naming == ExpertNaming::gpt_oss_fused) return detail::read_gpt_oss_expert(shards, layer, expert, only_param);
  if (layer.naming == ExpertNaming::fused_3d) return detail::read_fused_3d_expert(shards, layer, expert, only_param);
  ExpertParams out;
  out.w13_order = layer.recipe.w13_order;
  const std::vector<Projection> projs = projections(layer.naming);
  const bool w13_whole = projs.front().part == ProjPart::w13_whole;
  const std::string base = layer.prefix + "." + std::to_string(expert) + ".";
  for (const auto& r : layer.recipe.tensors) {
    const bool want_w13 = only_param.empty() || only_param == "w13_" + r.param;
    const bool want_w2 = only_param.empty() || only_param == "w2_" + r.param;
    if (!want_w13 && !want_w2) continue;
    const std::string gate_name = base + projs[0].name + "." + r.suffix;
    const std::string down_name = base + projs.back().name + "." + r.suffix;
    if (!r.required && !shards.find(gate_name)) continue;  // validated all-or-nothing at open
    if (want_w13 && w13_whole) {
      OwnedTensor w13 = as_owned(load_source(shards, gate_name), r.transpose);
      if (r.w13 == Assemble::pair) {
        // One scalar for a w13 stored whole: vLLM's per-shard vector has one entry per shard.
        OwnedTensor v(w13.dtype, {layer.gated ? uint64_t{2} : uint64_t{1}});
        for (size_t i = 0; i < v.shape[0]; ++i) std::memcpy(v.bytes.data() + i * w13.bytes.size(), w13.bytes.data(), w13.bytes.size());
        w13 = std::move(v);
      }
      if (r.canonical_dtype) w13.dtype = *r.canonical_dtype;
      out.tensors.emplace("w13_" + r.param, std::move(w13));
    } else if (want_w13) {
      const std::string up_name = base + projs[1].name + "." + r.suffix;
      if (r.w13 == Assemble::last_loaded) {
        OwnedTensor w13 = as_owned(load_source(shards, loaded_last(shards, gate_name, up_name)), r.transpose);
        if (r.canonical_dtype) w13.dtype = *r.canonical_dtype;
        out.tensors.emplace("w13_" + r.param, std::move(w13));
      } else {
        Source gate = load_source(shards, gate_name);
        const std::string gate_file = gate.file;
        OwnedTensor w13 = assemble_w13(r, as_owned(std::move(gate), r.transpose), as_owned(load_source(shards, up_name), r.transpose), gate_file, gate_name);
        if (r.canonical_dtype) w13.dtype = *r.canonical_dtype;
        out.tensors.emplace("w13_" + r.param, std::move(w13));
      }
    }
    if (want_w2) {
      OwnedTensor w2 = as_owned(load_source(shards, down_name), r.transpose);
      if (r.canonical_dtype) w2.dtype = *r.canonical_dtype;
      out.tensors.emplace("w2_" + r.param, std::move(w2));
    }
  }
  return out;
}

}  // namespace moepack::ckpt
