// `moepack inspect CKPT [--json] [--check-values]`: what a checkpoint is (CLI.md). Parsing and
// printing only; everything it reports comes from formats/checkpoints.
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "apps/moepack/command.h"
#include "formats/checkpoints/checkpoint.h"
#include "lib/core/error.h"
#include "lib/core/tensor.h"

namespace moepack::cli {
namespace {

struct InspectOptions {
  std::string checkpoint;
  bool json = false;
  bool check_values = false;
};

std::string with_commas(uint64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

nlohmann::json key_or_null(const std::string& k) { return k.empty() ? nlohmann::json(nullptr) : nlohmann::json(k); }

nlohmann::json method_json(const ckpt::MethodChoice& m) {
  return {{"quant_method", key_or_null(m.quant_method)}, {"moe_method", m.moe_method}, {"family", m.oracle_family},
          {"weight_key", key_or_null(m.weight_key)}, {"activation_key", key_or_null(m.activation_key)}};
}

nlohmann::json layer_json(const ckpt::MoeLayer& l) {
  const auto& q = l.quant;
  nlohmann::json params = nlohmann::json::array();
  for (const auto& p : l.params) params.push_back({{"name", p.name}, {"dtype", dtype_name(p.dtype)}, {"shape", p.shape}});
  nlohmann::json j = {
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
  return j;
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

// Two layers print as one line when everything but their prefix and index agrees.
std::string layer_signature(const ckpt::MoeLayer& l) {
  nlohmann::json j = layer_json(l);
  j.erase("prefix");
  j.erase("layer_index");
  return j.dump();
}

std::string layer_range(const std::vector<const ckpt::MoeLayer*>& group) {
  if (group.front()->layer_index < 0) return group.front()->prefix;
  if (group.size() == 1) return "layer " + std::to_string(group.front()->layer_index);
  return "layers " + std::to_string(group.front()->layer_index) + "-" + std::to_string(group.back()->layer_index);
}

std::string shape_text(const std::vector<uint64_t>& shape) { return shape_string(shape); }

std::string family_text(const ckpt::Checkpoint& c) { return c.has_config ? std::string(ckpt::family_name(c.family)) : "unknown"; }

// Without a config.json the tensors themselves are what there is to describe (CLI.md: a single
// valid file is described, exit 0).
constexpr size_t kListedTensors = 40;

nlohmann::json tensor_list_json(const ckpt::Checkpoint& c) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& f : c.shards->files())
    for (const auto& t : f->header().tensors) list.push_back({{"name", t.name}, {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"bytes", t.num_bytes()}});
  return list;
}

nlohmann::json metadata_json(const ckpt::Checkpoint& c) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& f : c.shards->files())
    for (const auto& [k, v] : f->header().metadata) j[k] = v;
  return j;
}

void print_human(const ckpt::Checkpoint& c, const InspectOptions& o, const ckpt::ValueScan* scan) {
  const auto& f = c.facts;
  std::ostringstream out;
  out << o.checkpoint << "\n";
  out << "  format       " << family_text(c) << ": " << c.scheme << "\n";
  if (!f.model_type.empty() || !f.architecture.empty())
    out << "  model        " << (f.model_type.empty() ? "?" : f.model_type) << (f.architecture.empty() ? "" : " (" + f.architecture + ")") << (f.dtype.empty() ? "" : ", " + f.dtype) << "\n";
  if (f.hidden_size) {
    out << "  shape        hidden " << f.hidden_size << ", expert width " << f.moe_intermediate_size << ", " << f.num_experts << " experts";
    if (f.num_shared_experts) out << " + " << f.num_shared_experts << " shared";
    out << ", top-" << f.top_k;
    if (f.num_hidden_layers) out << ", " << f.num_hidden_layers << " layers";
    out << "\n";
    out << "  moe          activation " << f.activation << ", routing " << f.routing_method << " (" << f.scoring_func << (f.renormalize ? ", renormalize" : "")
        << (f.has_e_score_correction_bias ? ", score correction bias" : "") << (f.n_group ? ", " + std::to_string(f.n_group) + " groups" : "") << ")";
    if (f.has_bias) out << ", biases";
    if (f.swiglu_limit) out << ", swiglu limit " << *f.swiglu_limit;
    out << "\n";
  }
  out << "  tensors      " << with_commas(c.tensor_count()) << " in " << c.shards->files().size() << " file" << (c.shards->files().size() == 1 ? "" : "s") << ", "
      << human_bytes(c.total_bytes) << "\n";
  if (!c.has_config) {
    for (const auto& f : c.shards->files())
      for (const auto& [k, v] : f->header().metadata) out << "  metadata     " << k << " = " << v << "\n";
    size_t listed = 0;
    for (const auto& f : c.shards->files())
      for (const auto& t : f->header().tensors)
        if (listed++ < kListedTensors) out << "    " << t.name << "  " << dtype_name(t.dtype) << " " << shape_text(t.shape) << "  " << human_bytes(t.num_bytes()) << "\n";
    if (listed > kListedTensors) out << "    ... and " << with_commas(listed - kListedTensors) << " more (--json lists all)\n";
  }
  if (c.layers.empty()) {
    out << "  MoE layers   none\n";
  } else {
    out << "  MoE layers   " << c.layers.size() << "\n";
    std::vector<std::vector<const ckpt::MoeLayer*>> groups;
    std::string last_sig;
    for (const auto& l : c.layers) {
      std::string sig = layer_signature(l);
      bool extends = !groups.empty() && sig == last_sig && l.layer_index >= 0 && groups.back().back()->layer_index + 1 == l.layer_index;
      if (extends) groups.back().push_back(&l);
      else groups.push_back({&l});
      last_sig = sig;
    }
    for (const auto& g : groups) {
      const auto& l = *g.front();
      const auto& q = l.quant;
      out << "    " << layer_range(g) << ": " << l.num_experts << " experts, " << q.scheme << (l.gated ? "" : ", not gated") << ", " << human_bytes(l.source_bytes) << " per layer\n";
      if (!c.has_config) {
        out << "      names      " << l.prefix << (g.size() > 1 ? " (and the other layers)" : "") << ", " << ckpt::naming_name(l.naming) << "\n";
        continue;
      }
      out << "      vLLM       " << (q.method.quant_method.empty() ? "(unquantized)" : q.method.quant_method) << " / " << q.method.moe_method << "\n";
      out << "      oracle     " << q.method.oracle_family << ", weight " << (q.method.weight_key.empty() ? "none" : q.method.weight_key) << ", activation "
          << (q.method.activation_key.empty() ? "none" : q.method.activation_key) << "\n";
      if (q.on_sm90)
        out << "      on SM90    " << q.on_sm90->moe_method << " (" << q.on_sm90->oracle_family << ", " << q.on_sm90->weight_key << " x " << q.on_sm90->activation_key << ")\n";
      if (!q.unsupported.empty()) out << "      refused    " << q.unsupported << "\n";
      out << "      names      " << l.prefix << (g.size() > 1 ? " (and the other layers)" : "") << ", " << ckpt::naming_name(l.naming) << ", w13 " << ckpt::w13_order_name(l.recipe.w13_order) << "\n";
      out << "      per expert";
      for (size_t i = 0; i < l.params.size(); ++i)
        out << (i ? "\n                 " : " ") << l.params[i].name << " " << dtype_name(l.params[i].dtype) << " " << shape_text(l.params[i].shape);
      out << "\n";
    }
  }
  for (const auto& n : c.notes) out << "  note         " << n << "\n";
  if (scan) {
    out << "  values       " << with_commas(scan->tensors_scanned) << " tensors, " << human_bytes(scan->bytes_scanned) << " scanned: ";
    if (!scan->bad_values) {
      out << "no NaN/Inf\n";
    } else {
      out << with_commas(scan->bad_values) << " bad value" << (scan->bad_values == 1 ? "" : "s") << " in " << scan->per_tensor.size() << " tensor" << (scan->per_tensor.size() == 1 ? "" : "s") << "\n";
      for (const auto& [name, count] : scan->per_tensor) out << "    " << name << ": " << with_commas(count) << "\n";
      for (const auto& fnd : scan->listed) out << "    " << fnd.tensor << "[" << fnd.element << "] = " << fnd.what << "\n";
      if (scan->listed.size() < scan->bad_values) out << "    (first " << scan->listed.size() << " listed)\n";
    }
  }
  std::cout << out.str();
}

int run_inspect(const InspectOptions& o) {
  ckpt::Checkpoint c = ckpt::open_checkpoint(o.checkpoint);
  std::optional<ckpt::ValueScan> scan;
  if (o.check_values) scan = ckpt::scan_values(c);
  std::string error;
  if (scan && scan->bad_values) {
    const auto& first = scan->listed.front();
    error = first.file + ": tensor `" + first.tensor + "`: element " + std::to_string(first.element) + " is " + first.what + " (" + std::to_string(scan->bad_values) +
            " bad value(s) in " + std::to_string(scan->per_tensor.size()) + " tensor(s))";
  }
  if (o.json) {
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& l : c.layers) layers.push_back(layer_json(l));
    nlohmann::json j = {{"path", o.checkpoint},
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
      j["metadata"] = metadata_json(c);
      j["tensor_list"] = tensor_list_json(c);
    }
    if (scan) j["check_values"] = scan_json(*scan);
    if (!error.empty()) j["error"] = {{"kind", "bad_input"}, {"exit_code", 4}, {"message", error}};
    std::cout << j.dump(2) << std::endl;
  } else {
    print_human(c, o, scan ? &*scan : nullptr);
  }
  if (!error.empty()) {
    std::fprintf(stderr, "moepack: error: %s\n", error.c_str());
    return static_cast<int>(ErrorKind::bad_input);
  }
  return 0;
}

CommandRegistration reg(10, [](CLI::App& app) {
  auto opts = std::make_shared<InspectOptions>();
  auto* sub = app.add_subcommand("inspect", "Describe a checkpoint: format, quantization scheme, MoE layers, experts, model facts");
  sub->add_option("CKPT", opts->checkpoint, "Checkpoint directory or .safetensors file")->required();
  sub->add_flag("--json", opts->json, "Print one JSON object (shape documented in moepack-inspect(1))");
  sub->add_flag("--check-values", opts->check_values, "Also scan tensor data for NaN/Inf and NaN scales (exit 4 if any)");
  sub->callback([opts] {
    global_flags().json = opts->json;
    set_exit_code(run_inspect(*opts));
  });
});

}  // namespace
}  // namespace moepack::cli
