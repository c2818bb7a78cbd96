#include "formats/artifact/manifest.h"

#include <filesystem>
#include <limits>

#include "formats/safetensors/strict_json.h"
#include "lib/core/error.h"

namespace moepack::artifact {
namespace {

using ojson = nlohmann::ordered_json;
using json = nlohmann::json;

ojson file_entries_json(const std::vector<FileEntry>& files) {
  ojson a = ojson::array();
  for (const auto& f : files) a.push_back(ojson{{"name", f.name}, {"bytes", f.bytes}, {"xxh3", f.xxh3}});
  return a;
}

ojson optional_string(const std::optional<std::string>& s) { return s ? ojson(*s) : ojson(nullptr); }

// Field readers that name the manifest and the key path on failure.
class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path) {}

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw_bad_input(path_, "", "manifest: `" + where + "` " + what);
  }
  const json& member(const json& obj, const std::string& key, const std::string& where) const {
    if (!obj.is_object()) fail(where, "is not an object");
    auto it = obj.find(key);
    if (it == obj.end()) fail(where + "." + key, "is missing");
    return *it;
  }
  std::string string(const json& obj, const std::string& key, const std::string& where) const {
    const json& v = member(obj, key, where);
    if (!v.is_string()) fail(where + "." + key, "is not a string");
    return v.get<std::string>();
  }
  std::optional<std::string> optional_string(const json& obj, const std::string& key, const std::string& where) const {
    const json& v = member(obj, key, where);
    if (v.is_null()) return std::nullopt;
    if (!v.is_string()) fail(where + "." + key, "is neither a string nor null");
    return v.get<std::string>();
  }
  uint64_t unsigned_number(const json& obj, const std::string& key, const std::string& where) const {
    const json& v = member(obj, key, where);
    if (!v.is_number_unsigned()) fail(where + "." + key, "is not a non-negative integer");
    return v.get<uint64_t>();
  }
  bool boolean(const json& obj, const std::string& key, const std::string& where) const {
    const json& v = member(obj, key, where);
    if (!v.is_boolean()) fail(where + "." + key, "is not true or false");
    return v.get<bool>();
  }
  std::optional<double> optional_number(const json& obj, const std::string& key, const std::string& where) const {
    const json& v = member(obj, key, where);
    if (v.is_null()) return std::nullopt;
    if (!v.is_number()) fail(where + "." + key, "is neither a number nor null");
    return v.get<double>();
  }
  const json& array(const json& obj, const std::string& key, const std::string& where) const {
    const json& v = member(obj, key, where);
    if (!v.is_array()) fail(where + "." + key, "is not an array");
    return v;
  }
  std::string hash(const json& obj, const std::string& key, const std::string& where) const {
    std::string h = string(obj, key, where);
    bool ok = h.size() == 32;
    for (char c : h) ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
    if (!ok) fail(where + "." + key, "is not 32 lowercase hex digits");
    return h;
  }
  std::string relative_file(const json& obj, const std::string& key, const std::string& where) const {
    std::string f = string(obj, key, where);
    if (f.empty() || f.front() == '/') fail(where + "." + key, "must be a relative file name");
    for (const auto& part : std::filesystem::path(f))
      if (part == "..") fail(where + "." + key, "must stay inside the artifact directory");
    return f;
  }
  std::vector<FileEntry> files(const json& obj, const std::string& key, const std::string& where) const {
    std::vector<FileEntry> out;
    const json& a = array(obj, key, where);
    for (size_t i = 0; i < a.size(); ++i) {
      std::string w = where + "." + key + "[" + std::to_string(i) + "]";
      out.push_back({relative_file(a[i], "name", w), unsigned_number(a[i], "bytes", w), hash(a[i], "xxh3", w)});
    }
    return out;
  }

 private:
  std::string path_;
};

}  // namespace

ojson to_json(const Manifest& m) {
  ojson layers = ojson::array();
  for (const auto& l : m.layers) {
    ojson ranks = ojson::array();
    for (const auto& r : l.ranks) {
      ojson tensors = ojson::object();
      for (const auto& [role, t] : r.tensors) {
        ojson tj{{"file", t.file}, {"name", t.name}, {"dtype", t.dtype}, {"shape", t.shape}, {"layout", t.layout}, {"xxh3", t.xxh3}};
        if (!t.canonical_dtype.empty()) {
          ojson canonical{{"dtype", t.canonical_dtype}, {"shape", t.canonical_shape}};
          if (!t.per_expert) {
            canonical["per_expert"] = false;
            canonical["derived"] = t.derived;
          }
          if (!t.value_stage.empty()) canonical["value_stage"] = t.value_stage;
          tj["canonical"] = canonical;
        }
        tensors[role] = tj;
      }
      ranks.push_back(ojson{{"rank", r.rank}, {"tensors", tensors}});
    }
    ojson layer{{"prefix", l.prefix}, {"family", l.family}, {"weight_key", optional_string(l.weight_key)},
                {"activation_key", optional_string(l.activation_key)}, {"backend", l.backend},
                {"experts_class", l.experts_class}, {"num_experts", l.num_experts}, {"top_k", l.top_k},
                {"activation", l.activation}, {"hidden_size", l.hidden_size},
                {"intermediate_size", l.intermediate_size}, {"padded_hidden_size", l.padded_hidden_size},
                {"padded_intermediate_size", l.padded_intermediate_size}};
    if (l.intermediate_size_scope) layer["intermediate_size_scope"] = *l.intermediate_size_scope;
    if (l.routing) {
      const RoutingFacts& rf = *l.routing;
      layer["routing"] = ojson{{"method", rf.method}, {"scoring_func", rf.scoring_func}, {"renormalize", rf.renormalize},
                               {"n_group", rf.n_group}, {"topk_group", rf.topk_group},
                               {"routed_scaling_factor", rf.routed_scaling_factor ? ojson(*rf.routed_scaling_factor) : ojson(nullptr)},
                               {"correction_bias", optional_string(rf.correction_bias)}};
      if (rf.hash_table) layer["routing"]["hash_table"] = *rf.hash_table;
      auto opt = [](const std::optional<double>& v) { return v ? ojson(*v) : ojson(nullptr); };
      layer["swiglu_limit"] = opt(l.swiglu_limit);
      layer["swiglu_alpha"] = opt(l.swiglu_alpha);
      layer["swiglu_beta"] = opt(l.swiglu_beta);
      layer["has_bias"] = l.has_bias;
      layer["w13_rows"] = l.w13_rows;
      layer["gated"] = l.gated;
    }
    if (!l.vllm.is_null()) layer["vllm"] = l.vllm;
    layer["ranks"] = ranks;
    layers.push_back(std::move(layer));
  }
  ojson source = {{"scheme", m.source_scheme}, {"scheme_description", m.source_scheme_description}, {"fingerprint", m.source_fingerprint}, {"files", file_entries_json(m.source_files)}};
  if (!m.source_model_id.empty()) {
    source["model_id"] = m.source_model_id;
    source["revision"] = m.source_revision;
    source["commit"] = m.source_commit;
  }
  return ojson{{"format", m.format},
               {"moepack_version", m.moepack_version},
               {"reference", m.reference},
               {"source", source},
               {"target", m.target},
               {"layers", layers},
               {"files", file_entries_json(m.files)}};
}

std::string manifest_text(const Manifest& m) { return to_json(m).dump(2) + "\n"; }

namespace {

std::vector<uint64_t> read_shape(const Reader& r, const json& holder, const std::string& where) {
  std::vector<uint64_t> shape;
  for (const auto& d : r.array(holder, "shape", where)) {
    if (!d.is_number_unsigned()) r.fail(where + ".shape", "holds a value that is not a non-negative integer");
    shape.push_back(d.get<uint64_t>());
  }
  return shape;
}

// One entry of a rank's "tensors" (`w` is its path, for messages).
PackedTensor read_packed_tensor(const Reader& r, const json& tj, const std::string& tw) {
  PackedTensor t;
  t.file = r.relative_file(tj, "file", tw);
  t.name = r.string(tj, "name", tw);
  t.dtype = r.string(tj, "dtype", tw);
  t.shape = read_shape(r, tj, tw);
  t.layout = r.string(tj, "layout", tw);
  t.xxh3 = r.hash(tj, "xxh3", tw);
  if (tj.contains("canonical")) {
    const json& c = r.member(tj, "canonical", tw);
    const std::string cw = tw + ".canonical";
    t.canonical_dtype = r.string(c, "dtype", cw);
    t.canonical_shape = read_shape(r, c, cw);
    if (c.contains("per_expert")) {
      const json& pe = r.member(c, "per_expert", cw);
      if (!pe.is_boolean()) r.fail(cw + ".per_expert", "is not true or false");
      t.per_expert = pe.get<bool>();
      if (!t.per_expert) t.derived = r.string(c, "derived", cw);
    }
    if (c.contains("value_stage")) t.value_stage = r.string(c, "value_stage", cw);
  }
  return t;
}

RankTensors read_rank(const Reader& r, const json& rj, const std::string& rw) {
  RankTensors rt;
  // Ranks are ints everywhere else; a larger number would wrap, not be refused.
  const uint64_t rank = r.unsigned_number(rj, "rank", rw);
  if (rank > static_cast<uint64_t>(std::numeric_limits<int>::max())) r.fail(rw + ".rank", "is out of range");
  rt.rank = static_cast<int>(rank);
  const json& tensors = r.member(rj, "tensors", rw);
  if (!tensors.is_object()) r.fail(rw + ".tensors", "is not an object");
  for (auto it = tensors.begin(); it != tensors.end(); ++it) rt.tensors.emplace(it.key(), read_packed_tensor(r, it.value(), rw + ".tensors." + it.key()));
  return rt;
}

// The run facts (routing, activation parameters, biases, w13 rows, gated), present together.
void read_run_facts(const Reader& r, const json& lj, const std::string& w, Layer& l) {
  const json& rj = r.member(lj, "routing", w);
  const std::string rw = w + ".routing";
  RoutingFacts rf;
  rf.method = r.string(rj, "method", rw);
  rf.scoring_func = r.string(rj, "scoring_func", rw);
  rf.renormalize = r.boolean(rj, "renormalize", rw);
  rf.n_group = r.unsigned_number(rj, "n_group", rw);
  rf.topk_group = r.unsigned_number(rj, "topk_group", rw);
  rf.routed_scaling_factor = r.optional_number(rj, "routed_scaling_factor", rw);
  rf.correction_bias = r.optional_string(rj, "correction_bias", rw);
  if (rj.contains("hash_table")) rf.hash_table = r.optional_string(rj, "hash_table", rw);
  l.routing = rf;
  l.swiglu_limit = r.optional_number(lj, "swiglu_limit", w);
  l.swiglu_alpha = r.optional_number(lj, "swiglu_alpha", w);
  l.swiglu_beta = r.optional_number(lj, "swiglu_beta", w);
  l.has_bias = r.boolean(lj, "has_bias", w);
  l.w13_rows = r.string(lj, "w13_rows", w);
  if (l.w13_rows != "gate_up_halves" && l.w13_rows != "interleaved" && l.w13_rows != "up_gate_halves")
    r.fail(w + ".w13_rows", "is `" + l.w13_rows + "` (known: gate_up_halves, interleaved, up_gate_halves)");
  l.gated = r.boolean(lj, "gated", w);
}

Layer read_layer(const Reader& r, const json& lj, const std::string& w) {
  Layer l;
  l.prefix = r.string(lj, "prefix", w);
  l.family = r.string(lj, "family", w);
  l.weight_key = r.optional_string(lj, "weight_key", w);
  l.activation_key = r.optional_string(lj, "activation_key", w);
  l.backend = r.string(lj, "backend", w);
  l.experts_class = r.string(lj, "experts_class", w);
  l.num_experts = r.unsigned_number(lj, "num_experts", w);
  l.top_k = r.unsigned_number(lj, "top_k", w);
  l.activation = r.string(lj, "activation", w);
  l.hidden_size = r.unsigned_number(lj, "hidden_size", w);
  l.intermediate_size = r.unsigned_number(lj, "intermediate_size", w);
  l.padded_hidden_size = r.unsigned_number(lj, "padded_hidden_size", w);
  l.padded_intermediate_size = r.unsigned_number(lj, "padded_intermediate_size", w);
  if (lj.contains("intermediate_size_scope")) {
    l.intermediate_size_scope = r.string(lj, "intermediate_size_scope", w);
    // Another scope would change what the sizes mean; a reader must not guess.
    if (*l.intermediate_size_scope != kPerRankScope)
      r.fail(w + ".intermediate_size_scope", "is `" + *l.intermediate_size_scope + "`, this moepack knows `" + kPerRankScope + "`");
  }
  if (lj.contains("routing")) read_run_facts(r, lj, w, l);
  if (lj.contains("vllm")) {
    const json& v = r.member(lj, "vllm", w);
    if (!v.is_object()) r.fail(w + ".vllm", "is not an object");
    l.vllm = ojson::parse(v.dump());
  }
  const json& ranks = r.array(lj, "ranks", w);
  for (size_t k = 0; k < ranks.size(); ++k) l.ranks.push_back(read_rank(r, ranks[k], w + ".ranks[" + std::to_string(k) + "]"));
  return l;
}

}  // namespace

Manifest manifest_from_json(const json& j, const std::string& path) {
  Reader r(path);
  Manifest m;
  m.format = r.string(j, "format", "$");
  if (m.format != kManifestFormat) r.fail("$.format", "is `" + m.format + "`, this moepack reads `" + kManifestFormat + "`");
  m.moepack_version = r.string(j, "moepack_version", "$");
  m.reference = r.string(j, "reference", "$");
  const json& source = r.member(j, "source", "$");
  m.source_scheme = r.string(source, "scheme", "$.source");
  m.source_scheme_description = r.string(source, "scheme_description", "$.source");
  m.source_fingerprint = r.string(source, "fingerprint", "$.source");
  m.source_files = r.files(source, "files", "$.source");
  if (source.contains("model_id")) {
    m.source_model_id = r.string(source, "model_id", "$.source");
    m.source_revision = r.string(source, "revision", "$.source");
    m.source_commit = r.string(source, "commit", "$.source");
  }
  const json& target = r.member(j, "target", "$");
  if (!target.is_object()) r.fail("$.target", "is not an object");
  m.target = ojson::parse(target.dump());
  const json& layers = r.array(j, "layers", "$");
  for (size_t i = 0; i < layers.size(); ++i) m.layers.push_back(read_layer(r, layers[i], "$.layers[" + std::to_string(i) + "]"));
  m.files = r.files(j, "files", "$");
  return m;
}

Manifest read_manifest(const std::string& path) { return manifest_from_json(read_strict_json_file(path), path); }

}  // namespace moepack::artifact
