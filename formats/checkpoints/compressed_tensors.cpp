// compressed-tensors (llm-compressor) checkpoints, checkpoint-formats.md 3.3. The quantization
// config holds `config_groups` (targets + weight/input QuantizationArgs + optional per-group
// format) and an `ignore` list. vLLM (CompressedTensorsMoEMethod.get_moe_method) resolves the
// scheme of a MoE layer from its `<layer>.0.{gate,up,down}_proj` names, requires all three to
// agree, and dispatches in this order: MXFP4, MXFP8, WNA16, NVFP4, FP8 W8A8, INT8 W8A8,
// W4A8 (FP8 activations on exactly SM90, else INT8 activations).
#include "formats/checkpoints/checkpoint.h"
#include "lib/core/error.h"

namespace moepack::ckpt::detail {
namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// compressed_tensors.quantization.QuantizationArgs, the fields vLLM's predicates read.
struct QuantArgs {
  int num_bits = 8;
  std::string type = "int";      // "int" | "float"
  bool symmetric = true;
  int64_t group_size = -1;       // -1: none
  std::string strategy;          // tensor channel group block token tensor_group
  std::vector<int64_t> block_structure;
  bool dynamic = false;          // true or "local" (NVFP4 activations)
  std::string actorder;          // "", group, weight, dynamic, static
  std::string scale_dtype;       // "torch.uint8", ...
};

QuantArgs parse_args(const nlohmann::json& j, const std::string& file, const std::string& where) {
  if (!j.is_object()) throw_bad_input(file, "", where + " must be an object");
  QuantArgs a;
  a.num_bits = static_cast<int>(json_int(j, "num_bits", file, 8));
  a.type = lower(json_string(j, "type", file, "int"));
  a.symmetric = json_bool(j, "symmetric", file, true);
  a.group_size = json_int(j, "group_size", file, -1);
  a.strategy = lower(json_string(j, "strategy", file, a.group_size > 0 ? "group" : "tensor"));
  if (const auto* b = find_key(j, "block_structure")) {
    if (b->is_array() && b->size() == 2 && (*b)[0].is_number_integer() && (*b)[1].is_number_integer()) {
      a.block_structure = {(*b)[0].get<int64_t>(), (*b)[1].get<int64_t>()};
    } else if (b->is_string()) {  // older "128x128"
      std::string s = b->get<std::string>();
      size_t x = s.find('x');
      try {
        if (x != std::string::npos) a.block_structure = {std::stoll(s.substr(0, x)), std::stoll(s.substr(x + 1))};
      } catch (const std::exception&) {
      }
    }
    if (a.block_structure.size() != 2 || a.block_structure[0] <= 0 || a.block_structure[1] <= 0)
      throw_bad_input(file, "", where + ": `block_structure` must be [n, k] with positive sizes, got " + b->dump());
  }
  if (const auto* d = find_key(j, "dynamic")) {
    if (d->is_boolean()) a.dynamic = d->get<bool>();
    else if (d->is_string() && d->get<std::string>() == "local") a.dynamic = true;
    else throw_bad_input(file, "", where + ": `dynamic` must be true, false or \"local\", got " + d->dump());
  }
  if (const auto* o = find_key(j, "actorder")) {
    if (o->is_string()) a.actorder = lower(o->get<std::string>());
    else if (o->is_boolean()) a.actorder = o->get<bool>() ? "group" : "";  // pre-enum configs
  }
  a.scale_dtype = json_string(j, "scale_dtype", file);
  if (a.num_bits <= 0 || a.num_bits > 16) throw_bad_input(file, "", where + ": `num_bits` " + std::to_string(a.num_bits) + " is out of range");
  return a;
}

struct Group {
  std::string name;
  std::vector<std::string> targets;
  QuantArgs weights;
  std::optional<QuantArgs> input;
  std::string format;
};

bool is_mxfp4(const QuantArgs& w) { return w.strategy == "group" && w.type == "float" && w.num_bits == 4 && w.group_size == 32 && w.symmetric; }
bool is_mxfp8(const QuantArgs& w, const std::string& format) {
  // Configs written before `scale_dtype` existed say so only through the format name.
  bool uint8_scales = w.scale_dtype == "torch.uint8" || format == "mxfp8-quantized";
  return w.strategy == "group" && w.type == "float" && w.num_bits == 8 && w.group_size == 32 && w.symmetric && uint8_scales;
}
bool is_nvfp4(const QuantArgs& a) { return a.strategy == "tensor_group" && a.type == "float" && a.num_bits == 4 && a.group_size == 16 && a.symmetric; }
bool is_fp8_w8a8(const QuantArgs& w, const std::optional<QuantArgs>& in) {
  if (!in) return false;
  bool ok_weight = w.type == "float" && in->type == "float" && w.symmetric && !w.dynamic && (w.strategy == "tensor" || w.strategy == "channel" || w.strategy == "block");
  if (!ok_weight) return false;
  return in->dynamic || (in->symmetric && in->strategy == "tensor");
}
bool is_int8_dynamic_token(const QuantArgs& w, const std::optional<QuantArgs>& in) {
  return in && w.num_bits == 8 && in->num_bits == 8 && (w.strategy == "tensor" || w.strategy == "channel") && in->strategy == "token" && !w.dynamic && in->dynamic && w.symmetric;
}
bool is_w4a8_token(const QuantArgs& w, const std::optional<QuantArgs>& in) {
  return in && w.num_bits == 4 && in->num_bits == 8 && (w.strategy == "group" || w.strategy == "channel") && in->strategy == "token" && !w.dynamic && in->dynamic && w.symmetric;
}
bool is_fp8_w4a8(const QuantArgs& w, const std::optional<QuantArgs>& in) {
  return in && w.num_bits == 4 && in->num_bits == 8 && w.strategy == "group" && in->strategy == "token" && !w.dynamic && in->dynamic && w.symmetric && in->symmetric;
}

class CompressedTensorsRules final : public FamilyRules {
 public:
  CompressedTensorsRules(std::vector<Group> groups, std::vector<std::string> ignore, std::string format, std::string source, std::string model_dtype)
      : groups_(std::move(groups)), ignore_(std::move(ignore)), format_(std::move(format)), source_(std::move(source)), model_dtype_(std::move(model_dtype)) {}

  Family family() const override { return Family::compressed_tensors; }

  std::string scheme() const override {
    std::string s = format_.empty() ? "compressed-tensors" : format_;
    if (groups_.size() == 1) s += " (" + describe(groups_[0].weights, groups_[0].input) + ")";
    else if (groups_.size() > 1) s += " (" + std::to_string(groups_.size()) + " config groups)";
    return s;
  }

  LayerQuant layer_quant(const std::string& prefix) const override {
    const char* projs[3] = {".0.gate_proj", ".0.up_proj", ".0.down_proj"};
    const Group* chosen = nullptr;
    for (int i = 0; i < 3; ++i) {
      const Group* g = match(prefix + projs[i]);
      // vLLM raises ValueError while building the layer: nothing downstream could use it.
      if (i > 0 && g != chosen)
        throw_bad_input(source_, "", "MoE layer `" + prefix + "`: all MoE projections need to have the same quantization scheme, but gate/up/down resolve to different config groups (or some are ignored)");
      chosen = g;
    }
    if (!chosen) return unquantized_layer_quant(model_dtype_);
    return dispatch(*chosen, prefix);
  }

  ExpertRecipe recipe(const LayerQuant& q, ExpertNaming) const override {
    if (!q.quantized()) return unquantized_recipe();
    ExpertRecipe r;
    const std::string& fam = q.method.oracle_family;
    if (fam == "mxfp4") {
      r.tensors = fp4_weight_rules("weight_packed", DType::U8, 32);
      // CompressedTensorsW4A4Mxfp4MoEMethod loads w13_weight_packed and renames it w13_weight
      // after loading: the role every MXFP4 layout knows it by.
      r.tensors[0].param = "weight";
    } else if (fam == "nvfp4") {
      r.tensors = fp4_weight_rules("weight_packed", DType::F8_E4M3, 16);
      r.tensors.push_back(scalar_rule("weight_global_scale", Assemble::pair));
      r.tensors.push_back(scalar_rule("input_global_scale", Assemble::pair, !q.method.activation_key.empty()));
    } else if (fam == "mxfp8") {
      r.tensors = {fp8_weight_rule("weight")};
      SourceTensorRule s{"weight_scale", {DType::U8, DType::F8_E8M0}, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, ceil_div(i, 32)}; }};
      s.param = "weight_scale";
      s.canonical_dtype = DType::U8;
      r.tensors.push_back(s);
    } else if (fam == "fp8" || fam == "int8") {
      r.tensors = fp8_or_int8_rules(q);
    } else if (fam == "wna16") {
      r.tensors = wna16_rules(q);
    } else if (fam == "w4a8_int8" || fam == "w4a8") {
      r.tensors = w4a8_rules(q);
    }
    // Biases (llm-compressor's linearized gpt-oss experts keep one per projection); vLLM's
    // compressed-tensors MoE methods allocate w13_bias / w2_bias when the model has them.
    SourceTensorRule b{"bias", {DType::BF16, DType::F16, DType::F32}, [](uint64_t o, uint64_t) { return std::vector<uint64_t>{o}; }, false};
    b.param = "bias";
    r.tensors.push_back(b);
    return r;
  }

 private:
  static const std::vector<DType>& float_scales() {
    static const std::vector<DType> dtypes = {DType::F32, DType::BF16, DType::F16};
    return dtypes;
  }

  // fp8 and int8 W8A8: the weight, its scale (per channel, per block or per tensor), static
  // input scales.
  static std::vector<SourceTensorRule> fp8_or_int8_rules(const LayerQuant& q) {
    std::vector<SourceTensorRule> rules = {fp8_weight_rule("weight")};
    if (q.method.oracle_family == "int8") rules[0].dtypes = {DType::I8};
    if (q.group_size == -1) {  // channel: [out, 1]
      SourceTensorRule s{"weight_scale", float_scales(), [](uint64_t o, uint64_t) { return std::vector<uint64_t>{o, 1}; }};
      s.param = "weight_scale";
      rules.push_back(s);
    } else if (!q.weight_block_size.empty()) {
      rules.push_back(block_scale_rule("weight_scale", static_cast<uint64_t>(q.weight_block_size[0]), static_cast<uint64_t>(q.weight_block_size[1]), float_scales()));
    } else {
      rules.push_back(scalar_rule("weight_scale", Assemble::pair));
    }
    // vLLM raises unless the gate and up input scales agree ("input_scales of w1 and w3 ... must be equal").
    if (q.input_scales == "static") rules.push_back(scalar_rule("input_scale", Assemble::same));
    return rules;
  }

  // WNA16: packed int weights, group scales, zero points when asymmetric, act-order g_idx.
  static std::vector<SourceTensorRule> wna16_rules(const LayerQuant& q) {
    const uint64_t bits = static_cast<uint64_t>(q.weight_bits);
    const int64_t g = q.group_size;
    auto groups = [g](uint64_t in) { return g > 0 ? ceil_div(in, static_cast<uint64_t>(g)) : 1; };
    // vLLM's Marlin/Triton/emulation backends hold these transposed ([K-packed, N]); gate and
    // up are then joined along the columns.
    SourceTensorRule w{"weight_packed", {DType::I32}, [bits](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, ceil_div(i * bits, 32)}; }};
    w.param = "weight_packed";
    w.transpose = true;
    w.w13 = Assemble::cols;
    SourceTensorRule s{"weight_scale", float_scales(), [groups](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, groups(i)}; }};
    s.param = "weight_scale";
    s.transpose = true;
    s.w13 = Assemble::cols;
    std::vector<SourceTensorRule> rules = {w, s};
    if (!q.symmetric) {
      SourceTensorRule z{"weight_zero_point", {DType::I32}, [bits, groups](uint64_t o, uint64_t i) { return std::vector<uint64_t>{ceil_div(o * bits, 32), groups(i)}; }};
      z.param = "weight_zero_point";
      z.transpose = true;
      z.w13 = Assemble::cols;
      rules.push_back(z);
    }
    SourceTensorRule gi{"weight_g_idx", {DType::I32}, [](uint64_t, uint64_t i) { return std::vector<uint64_t>{i}; }, q.actorder == "group"};
    gi.param = "weight_g_idx";
    gi.w13 = Assemble::same;
    rules.push_back(gi);
    rules.push_back(weight_shape_rule());
    return rules;
  }

  // W4A8 (int8 or fp8 activations): int4 weights, packed or one per byte, group scales.
  static std::vector<SourceTensorRule> w4a8_rules(const LayerQuant& q) {
    const int64_t g = q.group_size;
    auto groups = [g](uint64_t in) { return g > 0 ? ceil_div(in, static_cast<uint64_t>(g)) : 1; };
    SourceTensorRule s{"weight_scale", float_scales(), [groups](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, groups(i)}; }};
    s.param = "weight_scale";
    if (q.checkpoint_format == "int-quantized") {
      // ERRATA 14: int4 values one per byte in an I8 [out, in] `weight` (what
      // CompressedTensorsW4A8Int8MoEMethod allocates as w13_weight / w2_weight).
      SourceTensorRule w{"weight", {DType::I8}, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i}; }};
      w.param = "weight";
      return {w, s};
    }
    SourceTensorRule w{"weight_packed", {DType::I32}, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, ceil_div(i * 4, 32)}; }};
    w.param = "weight_packed";
    return {w, s, weight_shape_rule()};
  }

  static SourceTensorRule weight_shape_rule() {
    // [out, in] of the unpacked weight; vLLM keeps one per expert (both projections write it).
    SourceTensorRule ws{"weight_shape", {DType::I64, DType::I32}, [](uint64_t, uint64_t) { return std::vector<uint64_t>{2}; }, false};
    ws.param = "weight_shape";
    ws.w13 = Assemble::same;
    return ws;
  }

  bool ignored(const std::string& module) const {
    for (const auto& ig : ignore_) {
      if (ig.rfind("re:", 0) == 0 ? regex_prefix_match(ig.substr(3), module, source_) : ig == module) return true;
    }
    return false;
  }

  // The config group of a module: an exact name target wins over a regex, a regex over a
  // class name ("Linear"), as compressed-tensors' matcher orders them.
  const Group* match(const std::string& module) const {
    if (ignored(module)) return nullptr;
    for (int pass = 0; pass < 3; ++pass)
      for (const auto& g : groups_)
        for (const auto& t : g.targets) {
          bool hit = pass == 0 ? t == module : pass == 1 ? (t.rfind("re:", 0) == 0 && regex_prefix_match(t.substr(3), module, source_))
                                                         : (t == "Linear" || t == "RoutedExperts" || t == "FusedMoE");
          if (hit) return &g;
        }
    return nullptr;
  }

  static std::string describe(const QuantArgs& w, const std::optional<QuantArgs>& in) {
    std::string s = "w: " + w.type + std::to_string(w.num_bits) + " " + w.strategy;
    if (w.group_size > 0) s += " g" + std::to_string(w.group_size);
    if (!w.symmetric) s += " asym";
    if (in) s += ", a: " + in->type + std::to_string(in->num_bits) + " " + in->strategy + (in->dynamic ? " dynamic" : " static");
    return s;
  }

  // WNA16 (int weights, 16-bit activations); `q` holds what every scheme shares.
  static LayerQuant dispatch_wna16(const QuantArgs& w, const std::string& format, LayerQuant q) {
    const std::string ct = "compressed-tensors";
    q.scheme = "int" + std::to_string(w.num_bits) + (w.strategy == "channel" ? " channel" : " g" + std::to_string(w.group_size)) + (w.symmetric ? " sym" : " asym");
    bool bits_ok = w.symmetric ? (w.num_bits == 2 || w.num_bits == 3 || w.num_bits == 4 || w.num_bits == 8) : (w.num_bits == 4 || w.num_bits == 8);
    q.method = {ct, "CompressedTensorsWNA16MoEMethod", "wna16", wna16_key(w), ""};
    if (!bits_ok || format != "pack-quantized")
      q.unsupported = "For Fused MoE layers, only format: pack-quantized and bits: 4, 8 is supported (got format " + format + ", bits " + std::to_string(w.num_bits) + ")";
    q.act_order = w.strategy == "group" && (w.actorder == "group" || w.actorder == "dynamic");
    q.may_have_zp = !w.symmetric;
    q.may_have_bias = false;
    q.allow_tile_padding = !q.act_order;
    return q;
  }

  // FP8 W8A8: block, per-tensor or per-channel; `q` holds what every scheme shares.
  static LayerQuant dispatch_fp8(const QuantArgs& w, const QuantArgs& in, LayerQuant q) {
    const std::string ct = "compressed-tensors";
    bool per_tensor = w.strategy == "tensor" && in.strategy == "tensor";
    bool per_channel = w.strategy == "channel" && in.strategy == "token";
    q.method = {ct, "CompressedTensorsW8A8Fp8MoEMethod", "fp8", "", ""};
    if (w.strategy == "block") {
      q.scheme = "fp8 block";
      q.weight_block_size = w.block_structure.empty() ? std::vector<int64_t>{128, 128} : w.block_structure;
      q.scheme += " " + std::to_string(q.weight_block_size[0]) + "x" + std::to_string(q.weight_block_size[1]);
      q.method.weight_key = "kFp8Static128BlockSym";
      q.method.activation_key = "kFp8Dynamic128Sym";
    } else if (per_tensor) {
      q.scheme = "fp8 per-tensor";
      q.method.weight_key = "kFp8StaticTensorSym";
      q.method.activation_key = in.dynamic ? "kFp8Dynamic128Sym" : "kFp8StaticTensorSym";  // as coded upstream
    } else if (per_channel) {
      q.scheme = "fp8 per-channel";
      q.method.weight_key = "kFp8StaticChannelSym";
      q.method.activation_key = "kFp8DynamicTokenSym";
      if (!in.dynamic) q.unsupported = "For FP8 Fused MoE layer, we require either per tensor or channelwise, dynamic per token quantization";
    } else {
      q.scheme = "fp8 " + w.strategy;
      q.method.weight_key = w.strategy == "channel" ? "kFp8StaticChannelSym" : "kFp8StaticTensorSym";
      q.unsupported = "FP8 MoE needs per-tensor weights with per-tensor activations, channel weights with per-token activations, or block weights";
    }
    return q;
  }

  LayerQuant dispatch(const Group& g, const std::string& prefix) const {
    const QuantArgs& w = g.weights;
    const auto& in = g.input;
    const std::string format = g.format.empty() ? format_ : g.format;
    LayerQuant q;
    q.checkpoint_format = format;
    q.weight_bits = w.num_bits;
    q.group_size = w.strategy == "channel" ? -1 : (w.strategy == "group" || w.strategy == "tensor_group") ? w.group_size : 0;
    q.symmetric = w.symmetric;
    q.actorder = w.actorder;
    q.input_scales = in ? (in->dynamic ? "dynamic" : "static") : "";
    const std::string ct = "compressed-tensors";
    if (is_mxfp4(w)) {
      q.scheme = "mxfp4";
      // Input quantization is ignored by this method; CUTLASS quantizes activations to MXFP4 itself.
      q.method = {ct, "CompressedTensorsW4A4Mxfp4MoEMethod", "mxfp4", "kMxfp4Static", ""};
      return q;
    }
    if (is_mxfp8(w, format)) {
      q.scheme = "mxfp8";
      q.method = {ct, "CompressedTensorsW8A8Mxfp8MoEMethod", "mxfp8", "kMxfp8Static", "kMxfp8Dynamic"};
      q.input_scales = "dynamic";
      return q;
    }
    if ((w.strategy == "channel" || w.strategy == "group") && !in && !w.dynamic) return dispatch_wna16(w, format, q);
    if (is_nvfp4(w)) {
      bool a16 = !in;
      q.scheme = a16 ? "nvfp4 (W4A16)" : "nvfp4 (W4A4)";
      q.method = {ct, "CompressedTensorsW4A4Nvfp4MoEMethod", "nvfp4", "kNvfp4Static", a16 ? "" : "kNvfp4Dynamic"};
      q.global_scale_convention = "divisor";
      if (in && !is_nvfp4(*in)) q.unsupported = "For NVFP4 weights, input quantization must also be NVFP4 format or None for NVFP4A16";
      return q;
    }
    if (is_fp8_w8a8(w, in)) return dispatch_fp8(w, *in, q);
    if (is_int8_dynamic_token(w, in)) {
      q.scheme = "int8 W8A8";
      q.method = {ct, "CompressedTensorsW8A8Int8MoEMethod", "int8", "kInt8StaticChannelSym", "kInt8DynamicTokenSym"};
      if (w.strategy != "channel") q.unsupported = "For INT8 Fused MoE layers, only per-channel scales for weights are supported";
      return q;
    }
    if (is_w4a8_token(w, in)) {
      q.scheme = std::string("int4 ") + (w.strategy == "channel" ? "channel" : "g" + std::to_string(w.group_size)) + " W4A8 (" + in->type + "8 activations)";
      std::string key = "kInt4W4A8StaticChannelSym";
      if (w.strategy == "group") key = (w.group_size == 128 || w.group_size == 64 || w.group_size == 32) ? "kInt4W4A8StaticGroup" + std::to_string(w.group_size) + "Sym" : "kInt4W4A8StaticGroupSym";
      q.method = {ct, "CompressedTensorsW4A8Int8MoEMethod", "w4a8_int8", key, ""};
      if (is_fp8_w4a8(w, in)) q.on_sm90 = MethodChoice{ct, "CompressedTensorsW4A8Fp8MoEMethod", "w4a8", "kInt4Static", "kFp8DynamicTokenSym"};
      q.input_scales = "dynamic";
      return q;
    }
    // vLLM raises RuntimeError("Unsupported FusedMoe scheme"): nothing downstream could use it.
    throw_bad_input(source_, "", "config group `" + g.name + "` (" + describe(w, in) + ") of MoE layer `" + prefix +
                                     "` is not a fused-MoE scheme vLLM supports (mxfp4, mxfp8, wNa16, nvfp4, fp8 w8a8, int8 w8a8, w4a8)");
  }

  static std::string wna16_key(const QuantArgs& w) {
    bool g32 = w.strategy == "group" && w.group_size == 32;
    if (w.num_bits == 4) return w.symmetric ? (g32 ? "kInt4Static32" : "kInt4Static") : (g32 ? "kInt4Static32Asym" : "kInt4StaticAsym");
    if (w.num_bits == 8) return w.symmetric ? "kInt8Static" : "QuantKey(uint8, f16 static (1,-1), asym)";
    // 2/3-bit: an unnamed key (oracle.md 2.3).
    std::string group = w.strategy == "channel" ? "per-channel" : "(1," + std::to_string(w.group_size) + ")";
    return "QuantKey(uint" + std::to_string(w.num_bits) + "b" + std::to_string(1 << (w.num_bits - 1)) + ", f16 static " + group + ")";
  }

  std::vector<Group> groups_;
  std::vector<std::string> ignore_;
  std::string format_;
  std::string source_;
  std::string model_dtype_;
};

}  // namespace

std::unique_ptr<FamilyRules> make_compressed_tensors_rules(const DetectInput& in) {
  const std::string& file = in.quant_source;
  const auto& qc = in.quant_config;
  std::vector<Group> groups;
  const auto* cg = find_key(qc, "config_groups");
  if (!cg || !cg->is_object()) throw_bad_input(file, "", "compressed-tensors: `config_groups` is missing or not an object");
  for (auto it = cg->begin(); it != cg->end(); ++it) {
    const std::string where = "config_groups." + it.key();
    if (!it.value().is_object()) throw_bad_input(file, "", where + " must be an object");
    Group g;
    g.name = it.key();
    if (const auto* t = find_key(it.value(), "targets"); t && t->is_array())
      for (const auto& x : *t)
        if (x.is_string()) g.targets.push_back(x.get<std::string>());
    const auto* w = find_key(it.value(), "weights");
    if (!w) throw_bad_input(file, "", where + ": `weights` is missing");
    g.weights = parse_args(*w, file, where + ".weights");
    if (const auto* a = find_key(it.value(), "input_activations")) g.input = parse_args(*a, file, where + ".input_activations");
    g.format = json_string(it.value(), "format", file);
    groups.push_back(std::move(g));
  }
  std::vector<std::string> ignore;
  if (const auto* ig = find_key(qc, "ignore"); ig && ig->is_array())
    for (const auto& x : *ig)
      if (x.is_string()) ignore.push_back(x.get<std::string>());
  std::string dtype = json_string(in.config, "torch_dtype", in.config_file(), json_string(in.config, "dtype", in.config_file(), "bfloat16"));
  return std::make_unique<CompressedTensorsRules>(std::move(groups), std::move(ignore), json_string(qc, "format", file), file, dtype);
}

}  // namespace moepack::ckpt::detail
