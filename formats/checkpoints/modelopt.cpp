// NVIDIA ModelOpt checkpoints (checkpoint-formats.md 3.4). The algorithm comes either from the
// legacy `hf_quant_config.json` {"quantization": {"quant_algo", "exclude_modules", ...}} or from
// config.json's `quantization_config` with `quant_method: modelopt*` and a top-level
// `quant_algo` + `ignore`; MiniMax-style `quant_method: mxfp8` + `ignored_layers` loads the same
// way (vLLM's ModelOptMxFp8Config). NVFP4 per-tensor scales are multipliers
// (`weight_scale_2` = amax/(6*448)) stored as 0-d F32, kept per shard by vLLM (w13: [2]).
#include "formats/checkpoints/checkpoint.h"
#include "lib/core/error.h"

namespace moepack::ckpt::detail {
namespace {

class ModelOptRules final : public FamilyRules {
 public:
  ModelOptRules(std::string algo, std::vector<std::string> exclude, nlohmann::json quantized_layers, std::string source, std::string model_dtype)
      : algo_(std::move(algo)), exclude_(std::move(exclude)), quantized_layers_(std::move(quantized_layers)), source_(std::move(source)), model_dtype_(std::move(model_dtype)) {}

  Family family() const override { return Family::modelopt; }
  std::string scheme() const override { return "modelopt " + algo_; }

  LayerQuant layer_quant(const std::string& prefix) const override {
    if (excluded(prefix)) return unquantized_layer_quant(model_dtype_);
    std::string algo = algo_;
    std::string quant_method = algo_ == "MIXED_PRECISION" ? "modelopt_mixed" : "";
    if (algo_ == "MIXED_PRECISION") {
      // The per-module algorithm of the experts' first module (or the experts module itself).
      algo.clear();
      if (quantized_layers_.is_object())
        for (auto it = quantized_layers_.begin(); it != quantized_layers_.end(); ++it)
          if ((it.key() == prefix || it.key().rfind(prefix + ".", 0) == 0) && it.value().is_object()) {
            algo = lower(json_string(it.value(), "quant_algo", source_));
            for (char& c : algo) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
            break;
          }
      if (algo.empty()) return unquantized_layer_quant(model_dtype_);
    }
    LayerQuant q;
    q.checkpoint_format = algo;
    if (algo == "NVFP4" || algo == "W4A16_NVFP4") {
      bool a16 = algo == "W4A16_NVFP4";
      q.scheme = a16 ? "nvfp4 (W4A16)" : "nvfp4 (W4A4)";
      q.method = {quant_method.empty() ? "modelopt_fp4" : quant_method, "ModelOptNvFp4FusedMoE", "nvfp4", "kNvfp4Static", a16 ? "" : "kNvfp4Dynamic"};
      q.weight_bits = 4;
      q.group_size = 16;
      q.input_scales = a16 ? "" : "dynamic";
      q.global_scale_convention = "multiplier";
      return q;
    }
    if (algo == "FP8") {
      q.scheme = "fp8 per-tensor";
      q.method = {quant_method.empty() ? "modelopt" : quant_method, "ModelOptFp8MoEMethod", "fp8", "kFp8StaticTensorSym", "kFp8StaticTensorSym"};
      q.weight_bits = 8;
      q.input_scales = "static";
      return q;
    }
    if (algo == "MXFP8") {
      q.scheme = "mxfp8";
      q.method = {quant_method.empty() ? "modelopt_mxfp8" : quant_method, "ModelOptMxFp8FusedMoE", "mxfp8", "kMxfp8Static", "kMxfp8Dynamic"};
      q.weight_bits = 8;
      q.group_size = 32;
      q.input_scales = "dynamic";
      return q;
    }
    throw_bad_input(source_, "", "ModelOpt quant_algo `" + algo + "` of MoE layer `" + prefix + "` is not supported for fused MoE (supported: NVFP4, W4A16_NVFP4, FP8, MXFP8)");
  }

  ExpertRecipe recipe(const LayerQuant& q, ExpertNaming) const override {
    if (!q.quantized()) return unquantized_recipe();
    ExpertRecipe r;
    const std::string& fam = q.method.oracle_family;
    if (fam == "nvfp4") {
      r.tensors = fp4_weight_rules("weight", DType::F8_E4M3, 16);
      r.tensors.push_back(scalar_rule("weight_scale_2", Assemble::pair));
      r.tensors.push_back(scalar_rule("input_scale", Assemble::pair, !q.method.activation_key.empty()));
    } else if (fam == "fp8") {
      r.tensors = {fp8_weight_rule("weight"), scalar_rule("weight_scale", Assemble::pair), scalar_rule("input_scale", Assemble::last_loaded)};
    } else {  // mxfp8
      r.tensors = {fp8_weight_rule("weight")};
      SourceTensorRule s{"weight_scale", {DType::U8, DType::F8_E8M0}, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, (i + 31) / 32}; }};
      s.param = "weight_scale";
      s.canonical_dtype = DType::U8;
      r.tensors.push_back(s);
    }
    return r;
  }

 private:
  // vLLM's ModelOpt `is_layer_excluded`: exact name, substring (older exports), then fnmatch.
  bool excluded(const std::string& prefix) const {
    for (const auto& e : exclude_)
      if (e == prefix || prefix.find(e) != std::string::npos || fnmatch_glob(e, prefix)) return true;
    return false;
  }

  std::string algo_;
  std::vector<std::string> exclude_;
  nlohmann::json quantized_layers_;
  std::string source_;
  std::string model_dtype_;
};

std::vector<std::string> string_list(const nlohmann::json& obj, const char* key, const std::string& file) {
  std::vector<std::string> out;
  const auto* v = find_key(obj, key);
  if (!v) return out;
  if (!v->is_array()) throw_bad_input(file, "", std::string("`") + key + "` must be a list");
  for (const auto& x : *v)
    if (x.is_string()) out.push_back(x.get<std::string>());
  return out;
}

}  // namespace

std::unique_ptr<FamilyRules> make_modelopt_rules(const DetectInput& in) {
  const std::string& file = in.quant_source;
  const nlohmann::json& qc = in.quant_config;
  std::string algo;
  std::vector<std::string> exclude;
  nlohmann::json quantized_layers = nullptr;
  if (const auto* legacy = find_key(qc, "quantization")) {
    if (!legacy->is_object()) throw_bad_input(file, "", "`quantization` must be an object");
    algo = json_string(*legacy, "quant_algo", file);
    exclude = string_list(*legacy, "exclude_modules", file);
    if (const auto* ql = find_key(*legacy, "quantized_layers")) quantized_layers = *ql;
  } else if (lower(json_string(qc, "quant_method", file)) == "mxfp8") {
    algo = "MXFP8";
    exclude = string_list(qc, "ignored_layers", file);
  } else {
    algo = json_string(qc, "quant_algo", file);
    exclude = string_list(qc, "ignore", file);
    if (const auto* ql = find_key(qc, "quantized_layers")) quantized_layers = *ql;
  }
  for (char& c : algo) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (algo.empty()) throw_bad_input(file, "", "ModelOpt config has no `quant_algo`");
  std::string dtype = json_string(in.config, "torch_dtype", in.config_file(), json_string(in.config, "dtype", in.config_file(), "bfloat16"));
  return std::make_unique<ModelOptRules>(algo, std::move(exclude), std::move(quantized_layers), file, dtype);
}

}  // namespace moepack::ckpt::detail
