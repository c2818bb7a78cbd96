// AMD Quark OCP-MX checkpoints (checkpoint-formats.md 3.5, oracle.md 3.1.7). The scheme of a
// layer comes from `layer_quant_config` (fnmatch on module names), then
// `layer_type_quant_config`, then `global_quant_config`; `exclude` leaves layers unquantized.
// OCP-MX weights: dtype fp4 / fp6_e3m2 / fp6_e2m3, qscheme per_group, group 32, E8M0 scales.
// The scheme name is built from (weight, input) dtypes as vLLM's OCP_MX_Scheme does:
// w_mxfp4, w_mxfp4_a_fp8, w_mxfp4_a_mxfp4, w_mxfp4_a_mxfp6_e3m2, w_mxfp6_e2m3_a_fp8, ...
#include "formats/checkpoints/checkpoint.h"
#include "lib/core/error.h"

namespace moepack::ckpt::detail {
namespace {

class QuarkRules final : public FamilyRules {
 public:
  QuarkRules(nlohmann::json qc, std::string source, std::string model_dtype) : qc_(std::move(qc)), source_(std::move(source)), model_dtype_(std::move(model_dtype)) {}

  Family family() const override { return Family::quark; }
  std::string scheme() const override {
    const auto* g = find_key(qc_, "global_quant_config");
    if (!g) return "quark";
    try {
      return "quark " + scheme_name(*g);
    } catch (const Error&) {
      return "quark";
    }
  }

  LayerQuant layer_quant(const std::string& prefix) const override {
    // The expert modules as the checkpoint names them (amd-quark gpt-oss exports fuse gate/up).
    const std::string probes[4] = {prefix + ".0.gate_proj", prefix + ".0.up_proj", prefix + ".0.down_proj", prefix + ".0.gate_up_proj"};
    if (const auto* ex = find_key(qc_, "exclude"); ex && ex->is_array())
      for (const auto& e : *ex) {
        if (!e.is_string()) continue;
        std::string pat = e.get<std::string>();
        for (const auto& m : probes)
          if (m == pat || prefix == pat || (pat.rfind("re:", 0) == 0 && regex_prefix_match(pat.substr(3), m, source_)) || fnmatch_glob(pat, m))
            return unquantized_layer_quant(model_dtype_);
      }
    const nlohmann::json* cfg = nullptr;
    if (const auto* lq = find_key(qc_, "layer_quant_config"); lq && lq->is_object())
      for (auto it = lq->begin(); it != lq->end() && !cfg; ++it)
        for (const auto& m : probes)
          if (fnmatch_glob(it.key(), m)) {
            cfg = &it.value();
            break;
          }
    if (!cfg)
      if (const auto* lt = find_key(qc_, "layer_type_quant_config"); lt && lt->is_object())
        if (const auto* lin = find_key(*lt, "Linear")) cfg = lin;
    if (!cfg) cfg = find_key(qc_, "global_quant_config");
    if (!cfg || !cfg->is_object()) throw_bad_input(source_, "", "quark: no quantization config applies to MoE layer `" + prefix + "`");
    return from_config(*cfg, prefix);
  }

  ExpertRecipe recipe(const LayerQuant& q, ExpertNaming naming) const override {
    if (!q.quantized()) return unquantized_recipe();
    ExpertRecipe r;
    // amd-quark gpt-oss exports keep each expert's gate_up_proj as gpt-oss has it: interleaved
    // gate/up rows (ERRATA 11), loaded as they are by vLLM's `_load_weights_quark`.
    if (naming == ExpertNaming::per_expert_gate_up) r.w13_order = W13Order::interleaved;
    const bool fp6 = q.method.oracle_family == "mxfp6";
    SourceTensorRule w{"weight", {DType::U8}, [fp6](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, fp6 ? i * 3 / 4 : i / 2}; }};
    w.param = "weight";
    SourceTensorRule s{"weight_scale", {DType::U8, DType::F8_E8M0}, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, (i + 31) / 32}; }};
    s.param = "weight_scale";
    s.canonical_dtype = DType::U8;
    r.tensors = {w, s};
    // One static FP8 input scale per expert in vLLM (w13_input_scale [E]); gate and up write the
    // same slot, so the one loaded last survives (see Assemble::last_loaded).
    if (q.input_scales == "static") r.tensors.push_back(scalar_rule("input_scale", Assemble::last_loaded));
    SourceTensorRule b{"bias", {DType::F32, DType::BF16, DType::F16}, [](uint64_t o, uint64_t) { return std::vector<uint64_t>{o}; }, false};
    b.param = "bias";
    r.tensors.push_back(b);
    return r;
  }

 private:
  // QuarkOCP_MX_MoEMethod's own NotImplementedError text.
  static std::string not_implemented(const char* which, const std::string& scheme) {
    return std::string("QuarkOCP_MX_MoEMethod with ") + which + " input scales is currently not implemented for OCP MX scheme " + scheme + ". Please open an issue.";
  }

  // "fp4" -> "mxfp4", "fp6_e3m2" -> "mxfp6_e3m2", "fp8_e4m3" -> "fp8"; "" when not an OCP-MX dtype.
  static std::string mx_name(const std::string& dtype) {
    if (dtype == "fp4") return "mxfp4";
    if (dtype == "fp6_e3m2" || dtype == "fp6_e2m3") return "mx" + dtype;
    if (dtype == "fp8_e4m3") return "fp8";
    return "";
  }

  std::string scheme_name(const nlohmann::json& cfg) const {
    const auto* w = find_key(cfg, "weight");
    if (!w || !w->is_object()) throw_bad_input(source_, "", "quark: the weight config is not a single object (NVFP4-style two-level Quark configs are not supported)");
    std::string wname = mx_name(lower(json_string(*w, "dtype", source_)));
    std::string s = "w_" + (wname.empty() ? json_string(*w, "dtype", source_) : wname);
    if (const auto* in = find_key(cfg, "input_tensors"); in && in->is_object()) s += "_a_" + mx_name(lower(json_string(*in, "dtype", source_)));
    return s;
  }

  // QuarkConfig._is_fp8_w4a8: a two-entry weight list (fp8 per-tensor, then int4 per-channel).
  static bool is_fp8_w4a8_list(const nlohmann::json& w) {
    if (!w.is_array() || w.size() != 2 || !w[0].is_object() || !w[1].is_object()) return false;
    auto str = [](const nlohmann::json& o, const char* k) { return o.contains(k) && o[k].is_string() ? o[k].get<std::string>() : std::string(); };
    return str(w[0], "dtype") == "fp8_e4m3" && str(w[1], "dtype") == "int4";
  }

  LayerQuant from_config(const nlohmann::json& cfg, const std::string& prefix) const {
    const auto* w = find_key(cfg, "weight");
    if (w && is_fp8_w4a8_list(*w))
      throw_bad_input(source_, "", "quark: `" + prefix + "` is FP8/INT4 W4A8 (vLLM QuarkW4A8Fp8MoEMethod, ROCm AITER fused MoE only): "
                                   "this build does not read that scheme");
    if (!w || !w->is_object()) throw_bad_input(source_, "", "quark: the weight config of `" + prefix + "` is not a single object (only OCP-MX schemes are supported)");
    std::string wdtype = lower(json_string(*w, "dtype", source_));
    std::string qscheme = lower(json_string(*w, "qscheme", source_));
    int64_t group = json_int(*w, "group_size", source_, 0);
    std::string scale_format = lower(json_string(*w, "scale_format", source_, "e8m0"));
    std::string wname = mx_name(wdtype);
    bool ocp_mx = (wname == "mxfp4" || wname.rfind("mxfp6", 0) == 0) && qscheme == "per_group" && group == 32 && scale_format == "e8m0";
    if (!ocp_mx)
      throw_bad_input(source_, "", "quark scheme of `" + prefix + "` (weight dtype " + wdtype + ", qscheme " + qscheme + ", group " + std::to_string(group) +
                                       ") is not OCP-MX; only w_mxfp4 / w_mxfp6 variants are supported");
    LayerQuant q;
    q.scheme = scheme_name(cfg);
    q.quark_ocp_mx_scheme = q.scheme;
    q.weight_bits = wname == "mxfp4" ? 4 : 6;
    q.group_size = 32;
    q.method = {"quark", "QuarkOCP_MX_MoEMethod", wname == "mxfp4" ? "mxfp4" : "mxfp6", wname == "mxfp4" ? "kMxfp4Static" : (wname == "mxfp6_e3m2" ? "kMxfp6E3M2Static" : "kMxfp6E2M3Static"), ""};
    const auto* in = find_key(cfg, "input_tensors");
    if (!in) return q;
    if (!in->is_object()) throw_bad_input(source_, "", "quark: input_tensors of `" + prefix + "` must be an object");
    std::string iname = mx_name(lower(json_string(*in, "dtype", source_)));
    // QuantizationSpec's default: an input spec that does not say is static (ERRATA 11).
    bool dynamic = json_bool(*in, "is_dynamic", source_, false);
    q.input_scales = dynamic ? "dynamic" : "static";
    if (iname == "fp8") {
      q.method.activation_key = "kFp8StaticTensorSym";
      if (dynamic) q.unsupported = not_implemented("dynamic", q.quark_ocp_mx_scheme);
    } else if (iname == "mxfp4") {
      q.method.activation_key = "kMxfp4Dynamic";
      if (!dynamic) q.unsupported = not_implemented("static", q.quark_ocp_mx_scheme);
    } else if (iname == "mxfp6_e3m2" || iname == "mxfp6_e2m3") {
      q.method.activation_key = iname == "mxfp6_e3m2" ? "kMxfp6E3M2Dynamic" : "kMxfp6E2M3Dynamic";
      if (!dynamic) q.unsupported = not_implemented("static", q.quark_ocp_mx_scheme);
    } else {
      throw_bad_input(source_, "", "quark: input dtype `" + json_string(*in, "dtype", source_) + "` of `" + prefix + "` is not supported with OCP-MX weights");
    }
    // fp6 anywhere: vLLM selects no backend and forces EMULATION.
    if (q.method.oracle_family == "mxfp6" || iname.rfind("mxfp6", 0) == 0) q.scheme += " (emulation only)";
    return q;
  }

  nlohmann::json qc_;
  std::string source_;
  std::string model_dtype_;
};

}  // namespace

std::unique_ptr<FamilyRules> make_quark_rules(const DetectInput& in) {
  if (!find_key(in.quant_config, "export")) throw_bad_input(in.quant_source, "", "quark: the quantization config has no `export` block (vLLM requires it)");
  std::string dtype = json_string(in.config, "torch_dtype", in.config_file(), json_string(in.config, "dtype", in.config_file(), "bfloat16"));
  return std::make_unique<QuarkRules>(in.quant_config, in.quant_source, dtype);
}

}  // namespace moepack::ckpt::detail
