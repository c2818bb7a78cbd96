// Per-expert tensors: one tensor per expert, projection and param, as HF transformers writes
// experts and every quantizer exports them (Qwen, DeepSeek-V3, Mixtral, DeepSeek native,
// Nemotron-H, amd-quark gpt-oss), e.g. `model.layers.0.mlp.experts.7.gate_proj.weight_scale`:
//   <prefix>.<E>.{gate_proj,up_proj,down_proj}.<param>     (hf)
//   <prefix>.<E>.{w1,w3,w2}.<param>                        (mixtral, deepseek_native)
//   <prefix>.<E>.{up_proj,down_proj}.<param>               (hf_no_gate: up plays w1)
//   <prefix>.<E>.{gate_up_proj,down_proj}.<param>          (per_expert_gate_up: w13 stored whole)
// Which params a layer holds, their dtypes and shapes are the family's data (`ExpertRecipe`, one
// file per family); this file only interprets it, so the families share one validation and one
// assembly of gate and up into vLLM's w13, done as FusedMoE's weight_loader does it.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

#include "formats/checkpoints/expert_storage.h"
#include "lib/core/error.h"
#include "lib/core/natural_order.h"

namespace moepack::ckpt::detail {
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

// ---- canonical params -----------------------------------------------------------------------

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

class PerExpertStorage final : public ExpertStorage {
 public:
  void validate(const st::ShardSet& shards, const LayerScan& scan, MoeLayer& layer, const ModelFacts& facts) const override {
    const uint64_t found = scan.max_expert + 1;
    layer.num_experts = facts.num_experts ? facts.num_experts : found;
    if (found > layer.num_experts)
      throw_bad_input(scan.tensors.front().file->path(), layer.prefix + "." + std::to_string(scan.max_expert),
                      "expert index " + std::to_string(scan.max_expert) + " is out of range: config.json declares " + std::to_string(layer.num_experts) + " experts");
    validate_per_expert_layer(shards, layer, layer.recipe, scan.tensors);
  }

  ExpertParams read(const st::ShardSet& shards, const MoeLayer& layer, uint64_t expert, std::string_view only_param) const override {
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
};

}  // namespace

const ExpertStorage& per_expert_storage() {
  static const PerExpertStorage storage;
  return storage;
}

}  // namespace moepack::ckpt::detail
