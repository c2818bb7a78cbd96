#include "lib/convert/layer_json.h"

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <optional>
#include <sstream>

#include "lib/core/error.h"

namespace moepack::convert {
namespace orc = oracle;
using json = nlohmann::ordered_json;

namespace {

// Typed reads of a layer object's keys; an absent key leaves the destination as it is.
class LayerFields {
 public:
  LayerFields(const json& layer, const std::string& file) : j_(layer), file_(file) {}

  bool has(const char* key) const { return j_.contains(key); }
  void text(const char* key, std::string& out) const {
    if (!has(key)) return;
    if (!j_[key].is_string()) wrong(key, "must be a string");
    out = j_[key].get<std::string>();
  }
  void integer(const char* key, int& out) const {
    if (!has(key)) return;
    if (!j_[key].is_number_integer()) wrong(key, "must be an integer");
    out = j_[key].get<int>();
  }
  void boolean(const char* key, bool& out) const {
    if (!has(key)) return;
    if (!j_[key].is_boolean()) wrong(key, "must be true or false");
    out = j_[key].get<bool>();
  }
  void boolean(const char* key, std::optional<bool>& out) const {
    bool v = false;
    if (!has(key)) return;
    boolean(key, v);
    out = v;
  }
  // null reads as absent.
  void number(const char* key, std::optional<double>& out) const {
    if (!has(key) || j_[key].is_null()) return;
    if (!j_[key].is_number()) wrong(key, "must be a number");
    out = j_[key].get<double>();
  }

 private:
  [[noreturn]] void wrong(const char* key, const char* rule) const { throw_bad_input(file_, "", std::string("'") + key + "' " + rule); }
  const json& j_;
  const std::string& file_;
};

void reject_unknown_keys(const json& layer, const std::string& file) {
  static const std::vector<std::string> kKnown = {
      "prefix", "family", "quant_method", "method_class", "weight_key", "activation_key", "weight_bits", "group_size",
      "symmetric", "has_zero_points", "desc_act", "actorder", "may_have_zp", "may_have_bias", "allow_tile_padding",
      "quark_scheme", "static_input_scales", "allow_vllm_cutlass", "model_type", "architecture", "hidden_size", "intermediate_size",
      "moe_intermediate_size", "num_experts", "top_k", "activation", "routing", "scoring_func", "renormalize",
      "num_expert_group", "has_e_score_bias", "routed_scaling_factor", "router_logits_dtype", "has_bias",
      "swiglu_limit", "swiglu_alpha", "swiglu_beta", "situ_beta", "situ_linear_beta"};
  for (const auto& [k, v] : layer.items())
    if (std::find(kKnown.begin(), kKnown.end(), k) == kKnown.end()) throw_bad_input(file, "", "unknown layer key '" + k + "'");
}

// The quantization scheme: family, method, keys and the integer weight format.
void read_scheme(const LayerFields& f, const std::string& file, orc::MoeLayerQuery& q) {
  std::string family = "unquantized";
  f.text("family", family);
  auto parsed = orc::parse_family(family);
  if (!parsed) throw_bad_input(file, "", "unknown family '" + family + "'");
  q.family = *parsed;
  f.text("prefix", q.prefix);
  f.text("quant_method", q.quant_method);
  f.text("method_class", q.method_class);
  f.text("weight_key", q.weight_key);
  f.text("activation_key", q.activation_key);
  f.integer("weight_bits", q.weight_bits);
  f.integer("group_size", q.group_size);
  f.boolean("symmetric", q.symmetric);
  f.boolean("has_zero_points", q.has_zero_points);
  f.boolean("desc_act", q.desc_act);
  f.text("actorder", q.actorder);
  f.boolean("may_have_zp", q.may_have_zp);
  f.boolean("may_have_bias", q.may_have_bias);
  f.boolean("allow_tile_padding", q.allow_tile_padding);
  f.text("quark_scheme", q.quark_ocp_mx_scheme);
  f.boolean("static_input_scales", q.static_input_scales);
  f.boolean("allow_vllm_cutlass", q.allow_vllm_cutlass);
}

// The model: sizes, activation and its parameters, router dtype.
void read_model(const LayerFields& f, const std::string& file, orc::MoeLayerQuery& q) {
  f.text("model_type", q.model_type);
  f.text("architecture", q.architecture);
  f.integer("hidden_size", q.hidden_size);
  f.integer("intermediate_size", q.moe_intermediate_size);
  f.integer("moe_intermediate_size", q.moe_intermediate_size);
  f.integer("num_experts", q.num_experts);
  f.integer("top_k", q.top_k);
  f.text("activation", q.activation);
  f.boolean("has_bias", q.has_bias);
  f.number("swiglu_limit", q.swiglu_limit);
  f.number("swiglu_alpha", q.swiglu_alpha);
  f.number("swiglu_beta", q.swiglu_beta);
  f.number("situ_beta", q.situ_beta);
  f.number("situ_linear_beta", q.situ_linear_beta);
  std::string router_dtype;
  f.text("router_logits_dtype", router_dtype);
  if (!router_dtype.empty()) {
    q.router_logits_dtype = orc::parse_float_type(router_dtype);
    if (!q.router_logits_dtype) throw_bad_input(file, "", "unknown router_logits_dtype '" + router_dtype + "'");
  }
}

// The routing method, named ("routing") or derived the way vLLM derives it from the router
// settings ("scoring_func" and its companions); neither keeps the query's default.
void read_routing(const LayerFields& f, const std::string& file, orc::MoeLayerQuery& q) {
  if (f.has("routing")) {
    std::string r;
    f.text("routing", r);
    auto rm = orc::parse_routing_method(r);
    if (!rm) throw_bad_input(file, "", "unknown routing method '" + r + "'");
    q.routing = *rm;
  } else if (f.has("scoring_func")) {
    std::string scoring;
    bool renormalize = false, bias = false;
    int groups = 0;
    std::optional<double> scaling = 1.0;
    f.text("scoring_func", scoring);
    f.boolean("renormalize", renormalize);
    f.boolean("has_e_score_bias", bias);
    f.integer("num_expert_group", groups);
    if (f.has("routed_scaling_factor")) {
      scaling.reset();
      f.number("routed_scaling_factor", scaling);
    }
    q.routing = orc::get_routing_method_type(scoring, renormalize, groups, bias, scaling);
  }
}

}  // namespace

orc::MoeLayerQuery layer_query_from_json(const json& j, const std::string& file) {
  if (!j.is_object()) throw_bad_input(file, "", "each layer must be a JSON object");
  reject_unknown_keys(j, file);
  const LayerFields fields(j, file);
  orc::MoeLayerQuery q;
  read_scheme(fields, file, q);
  read_model(fields, file, q);
  read_routing(fields, file, q);
  return q;
}

std::vector<orc::MoeLayerQuery> read_layer_queries(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw_io(file, "cannot open", errno);
  std::stringstream ss;
  ss << in.rdbuf();
  json j;
  try {
    j = json::parse(ss.str());
  } catch (const json::parse_error& e) {
    throw_bad_input(file, "", std::string("not valid JSON: ") + e.what());
  }
  std::vector<orc::MoeLayerQuery> out;
  if (j.is_array()) {
    for (const auto& item : j) out.push_back(layer_query_from_json(item, file));
  } else {
    out.push_back(layer_query_from_json(j, file));
  }
  if (out.empty()) throw_bad_input(file, "", "no layer in the file");
  return out;
}

}  // namespace moepack::convert
