// GPTQ (AutoGPTQ / GPTQModel) checkpoints, checkpoint-formats.md 3.6. vLLM routes
// `quant_method: gptq` to AutoGPTQConfig ("auto_gptq") and its AutoGPTQMoEMethod; the MoE
// params are "transposed" (K-packed rows, output columns), so gate and up join along columns:
//   w13_qweight [H*bits/32, 2I]  w13_scales [H/g, 2I]  w13_qzeros [H/g, 2I*bits/32]  w13_g_idx [H]
//   w2_qweight  [I*bits/32, H]   w2_scales  [I/g, H]   w2_qzeros  [I/g, H*bits/32]   w2_g_idx  [I]
// qzeros stay as stored (v1 "gptq" format stores zero-1; ERRATA 6: kept as params).
// GPTQModel's `dynamic` rules ("-:regex" skips a module, "+:regex"/"regex" overrides fields)
// are applied to the layer prefix as vLLM does.
#include "formats/checkpoints/checkpoint.h"
#include "lib/core/error.h"

namespace moepack::ckpt::detail {
namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

struct GptqParams {
  int bits = 4;
  int64_t group_size = 128;
  bool desc_act = false;
  bool sym = true;
};

GptqParams read_params(const nlohmann::json& j, const std::string& file, GptqParams base) {
  base.bits = static_cast<int>(json_int(j, "bits", file, base.bits));
  base.group_size = json_int(j, "group_size", file, base.group_size);
  base.desc_act = json_bool(j, "desc_act", file, base.desc_act);
  base.sym = json_bool(j, "sym", file, base.sym);
  return base;
}

class GptqRules final : public FamilyRules {
 public:
  GptqRules(GptqParams base, nlohmann::json dynamic, std::string format, std::string source, std::string model_dtype)
      : base_(base), dynamic_(std::move(dynamic)), format_(std::move(format)), source_(std::move(source)), model_dtype_(std::move(model_dtype)) {}

  Family family() const override { return Family::gptq; }
  std::string scheme() const override { return "gptq " + describe(base_) + " (" + format_ + ")"; }

  LayerQuant layer_quant(const std::string& prefix) const override {
    GptqParams p = base_;
    if (dynamic_.is_object())
      for (auto it = dynamic_.begin(); it != dynamic_.end(); ++it) {
        const std::string& key = it.key();
        if (key.rfind("-:", 0) == 0) {
          if (regex_prefix_match(key.substr(2), prefix, source_)) return unquantized_layer_quant(model_dtype_);
          continue;
        }
        std::string pattern = key.rfind("+:", 0) == 0 ? key.substr(2) : key;
        if (regex_prefix_match(pattern, prefix, source_) && it.value().is_object()) {
          p = read_params(it.value(), source_, p);
          break;
        }
      }
    // One group along K makes act-order meaningless; vLLM drops it.
    if (p.desc_act && p.group_size == -1) p.desc_act = false;
    LayerQuant q;
    q.scheme = "int" + std::to_string(p.bits) + " " + describe(p);
    q.weight_bits = p.bits;
    q.group_size = p.group_size;
    q.symmetric = p.sym;
    q.act_order = p.desc_act;
    q.checkpoint_format = format_;
    q.method = {"auto_gptq", "AutoGPTQMoEMethod", "wna16", p.bits == 8 ? "kInt8Static" : "kInt4Static", ""};
    q.may_have_zp = !p.sym;
    q.may_have_bias = true;
    q.allow_tile_padding = !p.desc_act;
    if (!(p.bits == 4 || p.bits == 8) || !p.sym)
      q.unsupported = "Unsupported quantization config: bits=" + std::to_string(p.bits) + ", sym=" + (p.sym ? "True" : "False") + " (AutoGPTQ supports symmetric 4 and 8 bit)";
    if (p.group_size == 0 || p.group_size < -1) throw_bad_input(source_, "", "gptq: group_size " + std::to_string(p.group_size) + " is invalid");
    return q;
  }

  ExpertRecipe recipe(const LayerQuant& q, ExpertNaming) const override {
    if (!q.quantized()) return unquantized_recipe();
    const uint64_t bits = static_cast<uint64_t>(q.weight_bits);
    const int64_t g = q.group_size;
    auto groups = [g](uint64_t in) { return g > 0 ? ceil_div(in, static_cast<uint64_t>(g)) : 1; };
    auto make = [](std::string suffix, std::vector<DType> dt, std::function<std::vector<uint64_t>(uint64_t, uint64_t)> shape, Assemble how, bool required) {
      SourceTensorRule r{suffix, std::move(dt), std::move(shape), required};
      r.param = suffix;
      r.w13 = how;
      return r;
    };
    std::vector<DType> floats = {DType::F16, DType::BF16, DType::F32};
    ExpertRecipe r;
    r.tensors = {
        make("qweight", {DType::I32}, [bits](uint64_t o, uint64_t i) { return std::vector<uint64_t>{ceil_div(i * bits, 32), o}; }, Assemble::cols, true),
        make("qzeros", {DType::I32}, [bits, groups](uint64_t o, uint64_t i) { return std::vector<uint64_t>{groups(i), ceil_div(o * bits, 32)}; }, Assemble::cols, true),
        make("scales", floats, [groups](uint64_t o, uint64_t i) { return std::vector<uint64_t>{groups(i), o}; }, Assemble::cols, true),
        make("g_idx", {DType::I32}, [](uint64_t, uint64_t i) { return std::vector<uint64_t>{i}; }, Assemble::same, false),
        make("bias", floats, [](uint64_t o, uint64_t) { return std::vector<uint64_t>{o}; }, Assemble::rows, false),
    };
    return r;
  }

 private:
  static std::string describe(const GptqParams& p) {
    std::string s = p.group_size == -1 ? "channel" : "g" + std::to_string(p.group_size);
    s += p.sym ? " sym" : " asym";
    if (p.desc_act) s += " desc_act";
    return s;
  }

  GptqParams base_;
  nlohmann::json dynamic_;
  std::string format_;
  std::string source_;
  std::string model_dtype_;
};

}  // namespace

std::unique_ptr<FamilyRules> make_gptq_rules(const DetectInput& in) {
  const std::string& file = in.quant_source;
  if (!find_key(in.quant_config, "bits")) throw_bad_input(file, "", "gptq: `bits` is missing");
  GptqParams base = read_params(in.quant_config, file, GptqParams{});
  nlohmann::json dynamic = nullptr;
  if (const auto* d = find_key(in.quant_config, "dynamic")) dynamic = *d;
  std::string format = lower(json_string(in.quant_config, "checkpoint_format", file, "gptq"));
  if (format != "gptq" && format != "gptq_v2") throw_bad_input(file, "", "gptq: checkpoint_format `" + format + "` is not supported (expected gptq or gptq_v2)");
  std::string dtype = json_string(in.config, "torch_dtype", in.config_file(), json_string(in.config, "dtype", in.config_file(), "float16"));
  return std::make_unique<GptqRules>(base, std::move(dynamic), format, file, dtype);
}

}  // namespace moepack::ckpt::detail
