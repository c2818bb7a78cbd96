// Opening a checkpoint: its shards and config.json, the MoE layers found by tensor name, the
// family's rules (detect.cpp) and, for each layer, the storage its naming picks (one table,
// `expert_storage`), which validates the layer and reads its experts.
#include "formats/checkpoints/checkpoint.h"

#include <algorithm>
#include <filesystem>

#include "formats/checkpoints/expert_storage.h"
#include "formats/safetensors/strict_json.h"
#include "lib/core/error.h"

namespace moepack::ckpt {
namespace fs = std::filesystem;
using detail::LayerScan;
using detail::ScannedTensor;

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

std::string_view w13_order_name(W13Order o) { return o == W13Order::interleaved ? "interleaved" : "gate_then_up"; }

const MoeLayer* Checkpoint::find_layer(const std::string& prefix) const {
  for (const auto& l : layers)
    if (l.prefix == prefix) return &l;
  return nullptr;
}

namespace detail {

// ---- the storage of each naming --------------------------------------------------------------

const ExpertStorage& expert_storage(ExpertNaming naming) {
  switch (naming) {
    case ExpertNaming::hf:
    case ExpertNaming::mixtral:
    case ExpertNaming::deepseek_native:
    case ExpertNaming::hf_no_gate:
    case ExpertNaming::per_expert_gate_up: return per_expert_storage();
    case ExpertNaming::gpt_oss_fused: return gpt_oss_fused_storage();
    case ExpertNaming::fused_3d: return fused_3d_storage();
  }
  return per_expert_storage();
}

}  // namespace detail

namespace {

// Layer discovery: the per-expert name grammar `<prefix>.experts.<E>.<proj>.<param>` and the
// gpt-oss fused `<prefix>.experts.{gate_up_proj,down_proj}_{blocks,scales,bias}`. Views point
// into the tensor name (owned by the parsed header), so discovery allocates nothing per tensor.
std::optional<detail::ExpertTensorName> parse_expert_name(std::string_view name, const std::string& file) {
  static constexpr std::string_view marker = ".experts.";
  size_t p = name.rfind(marker);
  if (p == std::string_view::npos) return std::nullopt;
  detail::ExpertTensorName out;
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
  if (layer.quant.unsupported.empty() && !layer.recipe.loader_failure.empty()) {
    layer.quant.unsupported = layer.recipe.loader_failure;
    layer.quant.unsupported_error = layer.recipe.loader_error;
  }
  detail::expert_storage(layer.naming).validate(shards, scan, layer, ck.facts);
  // gpt-oss' experts have biases by architecture: vLLM allocates them (zeros where a
  // producer dropped the tensors), so the oracle must see them either way.
  if (ck.facts.has_bias) layer.has_bias = true;
  if (layer.has_bias) ck.facts.has_bias = true;
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

ExpertParams read_expert_params(const Checkpoint& ckpt, const MoeLayer& layer, uint64_t expert, std::string_view only_param) {
  if (!ckpt.has_config) throw Error(ErrorKind::bad_input, ckpt.path + ": no config.json, so the experts of `" + layer.prefix + "` cannot be read as canonical params");
  if (expert >= layer.num_experts)
    throw Error(ErrorKind::usage, "expert " + std::to_string(expert) + " is out of range for `" + layer.prefix + "` (" + std::to_string(layer.num_experts) + " experts)");
  return detail::expert_storage(layer.naming).read(*ckpt.shards, layer, expert, only_param);
}

}  // namespace moepack::ckpt
