// AutoAWQ (GEMM) checkpoints, checkpoint-formats.md 3.7. vLLM routes `quant_method: awq` to
// AutoAWQConfig ("auto_awq") and AutoAWQMoEMethod (4-bit only). Params are "transposed":
// qweight [K, N/8] packed along the output in AWQ's interleaved nibble order, so gate and up
// join along columns: w13_qweight [H, 2I/8], w13_qzeros [H/g, 2I/8], w13_scales [H/g, 2I].
// `modules_to_not_convert` entries skip any module whose name contains them.
#include "formats/checkpoints/checkpoint.h"
#include "lib/core/error.h"

namespace moepack::ckpt::detail {
namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

class AwqRules final : public FamilyRules {
 public:
  AwqRules(int bits, int64_t group, bool zero_point, std::string version, std::vector<std::string> skip, std::string model_dtype)
      : bits_(bits), group_(group), zero_point_(zero_point), version_(std::move(version)), skip_(std::move(skip)), model_dtype_(std::move(model_dtype)) {}

  Family family() const override { return Family::awq; }
  std::string scheme() const override { return "awq int" + std::to_string(bits_) + " g" + std::to_string(group_) + (zero_point_ ? " zp" : " sym") + " (" + version_ + ")"; }

  LayerQuant layer_quant(const std::string& prefix) const override {
    for (const auto& s : skip_)
      if (prefix.find(s) != std::string::npos) return unquantized_layer_quant(model_dtype_);
    LayerQuant q;
    q.scheme = "int" + std::to_string(bits_) + " g" + std::to_string(group_) + (zero_point_ ? " zp" : " sym");
    q.weight_bits = bits_;
    q.group_size = group_;
    q.symmetric = !zero_point_;
    q.checkpoint_format = version_;
    q.method = {"auto_awq", "AutoAWQMoEMethod", "wna16", "kInt4Static", ""};
    q.may_have_zp = zero_point_;
    q.may_have_bias = true;
    q.allow_tile_padding = true;
    if (bits_ != 4) q.unsupported = "AutoAWQMoEMethod only supports 4bit now";
    return q;
  }

  ExpertRecipe recipe(const LayerQuant& q, ExpertNaming) const override {
    if (!q.quantized()) return unquantized_recipe();
    const uint64_t pack = 32 / static_cast<uint64_t>(bits_);
    const uint64_t g = static_cast<uint64_t>(group_);
    auto make = [](std::string suffix, std::vector<DType> dt, std::function<std::vector<uint64_t>(uint64_t, uint64_t)> shape) {
      SourceTensorRule r{suffix, std::move(dt), std::move(shape)};
      r.param = suffix;
      r.w13 = Assemble::cols;
      return r;
    };
    ExpertRecipe r;
    r.tensors = {
        make("qweight", {DType::I32}, [pack](uint64_t o, uint64_t i) { return std::vector<uint64_t>{i, ceil_div(o, pack)}; }),
        make("qzeros", {DType::I32}, [pack, g](uint64_t o, uint64_t i) { return std::vector<uint64_t>{ceil_div(i, g), ceil_div(o, pack)}; }),
        make("scales", {DType::F16, DType::BF16, DType::F32}, [g](uint64_t o, uint64_t i) { return std::vector<uint64_t>{ceil_div(i, g), o}; }),
    };
    return r;
  }

 private:
  int bits_;
  int64_t group_;
  bool zero_point_;
  std::string version_;
  std::vector<std::string> skip_;
  std::string model_dtype_;
};

}  // namespace

std::unique_ptr<FamilyRules> make_awq_rules(const DetectInput& in) {
  const std::string& file = in.quant_source;
  const auto& qc = in.quant_config;
  int bits = static_cast<int>(json_int(qc, "bits", file, json_int(qc, "w_bit", file, 4)));
  int64_t group = json_int(qc, "group_size", file, json_int(qc, "q_group_size", file, 128));
  if (group <= 0) throw_bad_input(file, "", "awq: group_size " + std::to_string(group) + " is invalid (AWQ MoE needs a positive group size)");
  bool zero_point = json_bool(qc, "zero_point", file, true);
  std::string version = lower(json_string(qc, "version", file, "gemm"));
  if (version != "gemm") throw_bad_input(file, "", "awq: version `" + version + "` is not supported (only the GEMM layout)");
  if (bits <= 0 || 32 % bits) throw_bad_input(file, "", "awq: bits " + std::to_string(bits) + " does not divide a 32-bit word");
  std::vector<std::string> skip;
  if (const auto* m = find_key(qc, "modules_to_not_convert"); m && m->is_array())
    for (const auto& x : *m)
      if (x.is_string()) skip.push_back(x.get<std::string>());
  std::string dtype = json_string(in.config, "torch_dtype", in.config_file(), json_string(in.config, "dtype", in.config_file(), "float16"));
  return std::make_unique<AwqRules>(bits, group, zero_point, version, std::move(skip), dtype);
}

}  // namespace moepack::ckpt::detail
