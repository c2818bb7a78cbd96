#include "lib/report/inspect_report.h"

#include <map>

#include <optional>

#include "lib/core/json_output.h"
#include "lib/core/tensor.h"

namespace moepack::report {
namespace {

nlohmann::json key_or_null(const std::string& k) { return k.empty() ? nlohmann::json(nullptr) : nlohmann::json(k); }

nlohmann::json method_json(const ckpt::MethodChoice& m) {
  return {{"quant_method", key_or_null(m.quant_method)}, {"moe_method", m.moe_method}, {"family", m.oracle_family},
          {"weight_key", key_or_null(m.weight_key)}, {"activation_key", key_or_null(m.activation_key)}};
}

nlohmann::json facts_json(const ckpt::ModelFacts& f) {
  auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  return {{"model_type", key_or_null(f.model_type)},
          {"architecture", key_or_null(f.architecture)},
          {"dtype", key_or_null(f.dtype)},
          {"hidden_size", f.hidden_size},
          {"moe_hidden_size", f.moe_hidden_size ? nlohmann::json(f.moe_hidden_size) : nlohmann::json(nullptr)},
          {"moe_intermediate_size", f.moe_intermediate_size},
          {"num_experts", f.num_experts},
          {"num_shared_experts", f.num_shared_experts},
          {"top_k", f.top_k},
          {"num_hidden_layers", f.num_hidden_layers},
          {"hidden_act", key_or_null(f.hidden_act)},
          {"activation", key_or_null(f.activation)},
          {"scoring_func", key_or_null(f.scoring_func)},
          {"renormalize", f.renormalize},
          {"has_e_score_correction_bias", f.has_e_score_correction_bias},
          {"num_hash_layers", f.num_hash_layers},
          {"n_group", f.n_group},
          {"topk_group", f.topk_group},
          {"routed_scaling_factor", opt(f.routed_scaling_factor)},
          {"routing_method", key_or_null(f.routing_method)},
          {"has_bias", f.has_bias},
          {"swiglu_limit", opt(f.swiglu_limit)}};
}

nlohmann::json scan_json(const ckpt::ValueScan& s) {
  nlohmann::json findings = nlohmann::json::array();
  for (const auto& f : s.listed) findings.push_back({{"tensor", f.tensor}, {"file", f.file}, {"element", f.element}, {"what", f.what}});
  return {{"tensors_scanned", s.tensors_scanned}, {"bytes_scanned", s.bytes_scanned}, {"bad_values", s.bad_values}, {"per_tensor", s.per_tensor}, {"findings", findings}};
}

}  // namespace

nlohmann::json inspect_layer_json(const ckpt::MoeLayer& l) {
  const auto& q = l.quant;
  nlohmann::json params = nlohmann::json::array();
  for (const auto& p : l.params) params.push_back({{"name", p.name}, {"dtype", dtype_name(p.dtype)}, {"shape", p.shape}});
  return {
      {"prefix", l.prefix},
      {"layer_index", l.layer_index},
      {"naming", ckpt::naming_name(l.naming)},
      {"num_experts", l.num_experts},
      {"hidden_size", l.hidden_size},
      {"intermediate_size", l.intermediate_size},
      {"has_bias", l.has_bias},
      {"gated", l.gated},
      {"scheme", q.scheme},
      {"quant_method", key_or_null(q.method.quant_method)},
      {"moe_method", q.method.moe_method},
      {"family", q.method.oracle_family},
      {"weight_key", key_or_null(q.method.weight_key)},
      {"activation_key", key_or_null(q.method.activation_key)},
      {"on_sm90", q.on_sm90 ? method_json(*q.on_sm90) : nlohmann::json(nullptr)},
      {"weight_bits", q.weight_bits},
      {"group_size", q.group_size},
      {"symmetric", q.symmetric},
      {"act_order", q.act_order},
      {"actorder", key_or_null(q.actorder)},
      {"may_have_zp", q.may_have_zp},
      {"may_have_bias", q.may_have_bias},
      {"allow_tile_padding", q.allow_tile_padding},
      {"checkpoint_format", key_or_null(q.checkpoint_format)},
      {"weight_block_size", q.weight_block_size.empty() ? nlohmann::json(nullptr) : nlohmann::json(q.weight_block_size)},
      {"input_scales", key_or_null(q.input_scales)},
      {"global_scale_convention", key_or_null(q.global_scale_convention)},
      {"unsupported", key_or_null(q.unsupported)},
      {"w13_order", ckpt::w13_order_name(l.recipe.w13_order)},
      {"params", params},
      {"tensor_count", l.tensors.size()},
      {"source_bytes", l.source_bytes},
  };
}

std::string bad_values_message(const ckpt::ValueScan& scan) {
  if (scan.bad_values == 0) return "";
  const std::string counts =
      std::to_string(scan.bad_values) + " bad value(s) in " + std::to_string(scan.per_tensor.size()) + " tensor(s)";
  if (scan.listed.empty()) return counts;  // a scan asked to list none
  const auto& first = scan.listed.front();
  return first.file + ": tensor `" + first.tensor + "`: element " + std::to_string(first.element) + " is " + first.what + " (" + counts + ")";
}

std::string family_text(const ckpt::Checkpoint& c) { return c.has_config ? std::string(ckpt::family_name(c.family)) : "unknown"; }

nlohmann::json inspect_json(const ckpt::Checkpoint& c, const std::string& path, const ckpt::ValueScan* scan) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : c.layers) layers.push_back(inspect_layer_json(l));
  nlohmann::json j = {{"path", path},
                      {"family", family_text(c)},
                      {"scheme", c.scheme},
                      {"scheme_id", c.scheme_id},
                      {"has_config", c.has_config},
                      {"quantization_config_source", key_or_null(c.quant_config_source)},
                      {"model", facts_json(c.facts)},
                      {"tensors", {{"count", c.tensor_count()}, {"files", c.shards->files().size()}, {"bytes", c.total_bytes}}},
                      {"moe_layers", layers},
                      {"notes", c.notes}};
  if (!c.has_config) {
    // Without a config.json the tensors themselves are what there is to describe (docs/CLI.md: a
    // single valid file is described, exit 0).
    nlohmann::json metadata = nlohmann::json::object(), list = nlohmann::json::array();
    for (const auto& f : c.shards->files()) {
      for (const auto& [k, v] : f->header().metadata) metadata[k] = v;
      for (const auto& t : f->header().tensors) list.push_back({{"name", t.name}, {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"bytes", t.num_bytes()}});
    }
    j["metadata"] = metadata;
    j["tensor_list"] = list;
  }
  if (scan) {
    j["check_values"] = scan_json(*scan);
    const std::string error = bad_values_message(*scan);
    if (!error.empty()) j["error"] = error_json(ErrorKind::bad_input, error)["error"];
  }
  return j;
}

std::string artifact_line(const artifact::Manifest& m) {
  std::string device = m.target.contains("device") && m.target["device"].is_string() ? m.target["device"].get<std::string>() : "?";
  std::string line = m.format + " artifact for " + device;
  if (m.target.contains("tp_size") && m.target["tp_size"].is_number_integer()) line += " (tp " + std::to_string(m.target["tp_size"].get<int64_t>()) + ")";
  line += ", converted from " + (m.source_scheme_description.empty() ? m.source_scheme : m.source_scheme_description) + ": ";
  std::map<std::string, size_t> backends;
  for (const auto& l : m.layers) ++backends[l.backend];
  line += std::to_string(m.layers.size()) + " MoE layer" + (m.layers.size() == 1 ? "" : "s") + " packed";
  std::string names;
  for (const auto& [backend, n] : backends) names += (names.empty() ? "" : ", ") + backend + (backends.size() > 1 ? " x" + std::to_string(n) : "");
  if (!names.empty()) line += " for " + names;
  return line;
}

nlohmann::json artifact_json(const artifact::Manifest& m) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : m.layers) layers.push_back({{"prefix", l.prefix}, {"backend", l.backend}, {"experts_class", l.experts_class}});
  return {{"format", m.format}, {"source_scheme", m.source_scheme}, {"target", m.target}, {"layers", layers}};
}

nlohmann::json hub_json(const ckpt::CheckpointLocation& location) {
  return {{"model_id", location.model_id}, {"revision", location.revision}, {"commit", location.commit}, {"snapshot", location.path}};
}

std::string hub_line(const ckpt::CheckpointLocation& location) {
  return location.model_id + "@" + location.revision + ": commit " + location.commit + ", snapshot " + location.path;
}

}  // namespace moepack::report
