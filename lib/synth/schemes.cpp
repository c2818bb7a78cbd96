// How each family stores one nn.Linear, and the quantization config it writes. Names, dtypes and
// shapes follow checkpoint-formats.md: 3.3 (compressed-tensors), 3.4 (ModelOpt), 3.5 (Quark),
// 3.6 (GPTQ), 3.7 (AWQ), 3.8 (DeepSeek-V3), 3.9 (DeepSeek-V4); packing rules are in quantize.h.
#include <algorithm>
#include <cmath>

#include "lib/core/codecs.h"
#include "lib/core/error.h"
#include "lib/core/tensor.h"
#include "lib/synth/internal.h"
#include "lib/synth/rng.h"

namespace moepack::synth {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

constexpr uint64_t kGroup = 128;  // the int4/int8 group size and FP8 block edge of these families

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

std::vector<uint8_t> f32_scalar(float v) { return bytes_of_f32({v}); }

std::vector<uint8_t> i64_pair(uint64_t a, uint64_t b) {
  std::vector<uint8_t> out(16);
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<uint8_t>(a >> (8 * i));
    out[8 + i] = static_cast<uint8_t>(b >> (8 * i));
  }
  return out;
}

std::vector<uint8_t> bf16_bytes(const Matrix& w) { return bytes_as(w.values, ScaleStorage::bf16); }

std::vector<uint8_t> int8_bytes(const std::vector<int32_t>& codes, int32_t offset) {
  std::vector<uint8_t> out(codes.size());
  for (size_t i = 0; i < codes.size(); ++i) out[i] = static_cast<uint8_t>(static_cast<int8_t>(codes[i] - offset));
  return out;
}

// ---- compressed-tensors ------------------------------------------------------------------

void emit_ct_nvfp4(Sink& sink, const LinearJob& j, const Matrix* w, float pair_amax, bool input_scale, uint64_t seed) {
  const std::string& m = j.module;
  std::vector<uint8_t> packed, scales, global, input_global;
  if (w) {
    float amax = pair_amax > 0.0f ? pair_amax : abs_max(*w);
    float global_scale = 448.0f * 6.0f / amax;  // a divisor: w = fp4 · scale / global
    NvFp4Quantized q = quantize_nvfp4(*w, 1.0f / global_scale, false);
    packed = pack_nibbles(q.codes);
    scales = std::move(q.scales);
    global = f32_scalar(global_scale);
    input_global = f32_scalar(448.0f * 6.0f / activation_amax(seed, j.key));
  }
  sink.add(m + ".weight_packed", DType::U8, {j.out, j.in / 2}, std::move(packed));
  sink.add(m + ".weight_scale", DType::F8_E4M3, {j.out, j.in / 16}, std::move(scales));
  sink.add(m + ".weight_global_scale", DType::F32, {1}, std::move(global));
  if (input_scale) sink.add(m + ".input_global_scale", DType::F32, {1}, std::move(input_global));
}

void emit_mx(Sink& sink, const LinearJob& j, const Matrix* w, MxElement element, DType weight_dtype, DType scale_dtype,
             const std::string& scale_name) {
  std::vector<uint8_t> packed, scales;
  if (w) {
    MxQuantized q = quantize_mx(*w, element);
    packed = element == MxElement::e2m1 ? pack_nibbles(q.codes) : element == MxElement::e3m2 ? pack_fp6(q.codes) : q.codes;
    scales = std::move(q.scales);
  }
  uint64_t packed_cols = element == MxElement::e2m1 ? j.in / 2 : element == MxElement::e3m2 ? j.in * 3 / 4 : j.in;
  sink.add(j.module + ".weight", weight_dtype, {j.out, packed_cols}, std::move(packed));
  sink.add(j.module + "." + scale_name, scale_dtype, {j.out, j.in / 32}, std::move(scales));
}

// Gate and up read the same activations, so whatever is calibrated on the input is the same
// for both: GPTQ's Hessian and with it the act order (vLLM keeps one w13 g_idx per expert), and
// a static input scale (compressed-tensors: vLLM raises unless w1's and w3's agree). Both take
// the gate's key.
std::string input_key(const std::string& key) {
  return key.ends_with(".up") ? key.substr(0, key.size() - 3) + ".gate" : key;
}

// pack-quantized (WNA16, W4A8): weight_packed [O, K·bits/32], weight_scale [O, groups],
// weight_shape, and the zero point / g_idx of the variants.
void emit_ct_packed(Sink& sink, const LinearJob& j, const Matrix* w, int bits, uint64_t group, bool symmetric,
                    bool actorder, uint64_t seed) {
  const std::string& m = j.module;
  uint64_t groups = group ? ceil_div(j.in, group) : 1;
  std::vector<uint8_t> packed, scales, zeros, g_idx;
  if (w) {
    std::vector<int32_t> order = actorder ? act_order_g_idx(j.in, group, derive_seed(seed, input_key(j.key) + ".g_idx")) : std::vector<int32_t>{};
    IntQuantized q = quantize_int(*w, bits, group, symmetric, ScaleStorage::bf16, order);
    packed = bytes_of(pack_int32_rows(q.codes, j.out, j.in, bits));
    scales = bytes_as(q.scales, ScaleStorage::bf16);
    zeros = bytes_of(pack_int32_cols(q.zeros, j.out, groups, bits));
    g_idx = bytes_of(q.g_idx);
  }
  sink.add(m + ".weight_packed", DType::I32, {j.out, j.in * bits / 32}, std::move(packed));
  sink.add(m + ".weight_scale", DType::BF16, {j.out, groups}, std::move(scales));
  sink.add(m + ".weight_shape", DType::I64, {2}, sink.with_data() ? i64_pair(j.out, j.in) : std::vector<uint8_t>{});
  if (!symmetric) sink.add(m + ".weight_zero_point", DType::I32, {ceil_div(j.out * bits, 32), groups}, std::move(zeros));
  if (actorder) sink.add(m + ".weight_g_idx", DType::I32, {j.in}, std::move(g_idx));
}

enum class Fp8Granularity { tensor, channel, block };

void emit_fp8(Sink& sink, const LinearJob& j, const Matrix* w, Fp8Granularity g, ScaleStorage storage,
              const std::string& scale_name, std::vector<uint64_t> tensor_scale_shape, bool power_of_two,
              DType scale_dtype) {
  uint64_t br = g == Fp8Granularity::tensor ? j.out : g == Fp8Granularity::channel ? 1 : kGroup;
  uint64_t bc = g == Fp8Granularity::block ? kGroup : j.in;
  std::vector<uint8_t> codes, scales;
  if (w) {
    Fp8Quantized q = quantize_fp8(*w, br, bc, storage, power_of_two);
    codes = std::move(q.codes);
    if (scale_dtype == DType::F8_E8M0) {
      for (float s : q.scales) {
        int e;
        std::frexp(s, &e);
        scales.push_back(static_cast<uint8_t>(e - 1 + 127));  // s is 2^(e-1) exactly
      }
    } else {
      scales = bytes_as(q.scales, storage);
    }
  }
  std::vector<uint64_t> scale_shape = g == Fp8Granularity::tensor ? tensor_scale_shape
                                      : g == Fp8Granularity::channel ? std::vector<uint64_t>{j.out, 1}
                                                                     : std::vector<uint64_t>{ceil_div(j.out, kGroup), ceil_div(j.in, kGroup)};
  sink.add(j.module + ".weight", DType::F8_E4M3, {j.out, j.in}, std::move(codes));
  sink.add(j.module + "." + scale_name, scale_dtype, scale_shape, std::move(scales));
}

// ---- ModelOpt ----------------------------------------------------------------------------

void emit_mo_nvfp4(Sink& sink, const LinearJob& j, const Matrix* w, float pair_amax, bool input_scale, uint64_t seed) {
  const std::string& m = j.module;
  std::vector<uint8_t> packed, scales, scale2, input;
  if (w) {
    float amax = pair_amax > 0.0f ? pair_amax : abs_max(*w);
    float weight_scale_2 = amax / (6.0f * 448.0f);  // a multiplier
    NvFp4Quantized q = quantize_nvfp4(*w, weight_scale_2, true);
    packed = pack_nibbles(q.codes);
    scales = std::move(q.scales);
    scale2 = f32_scalar(weight_scale_2);
    input = f32_scalar(activation_amax(seed, j.key) / (6.0f * 448.0f));
  }
  sink.add(m + ".weight", DType::U8, {j.out, j.in / 2}, std::move(packed));
  sink.add(m + ".weight_scale", DType::F8_E4M3, {j.out, j.in / 16}, std::move(scales));
  sink.add(m + ".weight_scale_2", DType::F32, {}, std::move(scale2));
  if (input_scale) sink.add(m + ".input_scale", DType::F32, {}, std::move(input));
}

// ---- GPTQ / AWQ --------------------------------------------------------------------------

void emit_gptq(Sink& sink, const LinearJob& j, const Matrix* w, int bits, bool desc_act, uint64_t seed) {
  const std::string& m = j.module;
  uint64_t groups = ceil_div(j.in, kGroup);
  std::vector<uint8_t> qweight, qzeros, scales, g_idx;
  if (w) {
    std::vector<int32_t> order = desc_act ? act_order_g_idx(j.in, kGroup, derive_seed(seed, input_key(j.key) + ".g_idx")) : std::vector<int32_t>{};
    IntQuantized q = quantize_int(*w, bits, kGroup, true, ScaleStorage::f16, order);
    // GPTQ keeps the [K, O] orientation and packs along K (dim 0); zeros pack along O.
    qweight = bytes_of(pack_int32_cols(transpose(q.codes, j.out, j.in), j.in, j.out, bits));
    // v1 ("gptq") checkpoints store zero - 1.
    std::vector<int32_t> zeros_minus_one(q.zeros.size());
    for (size_t i = 0; i < q.zeros.size(); ++i) zeros_minus_one[i] = q.zeros[i] - 1;
    qzeros = bytes_of(pack_int32_rows(transpose(zeros_minus_one, j.out, groups), groups, j.out, bits));
    scales = bytes_as(transpose(q.scales, j.out, groups), ScaleStorage::f16);
    g_idx = bytes_of(q.g_idx);
  }
  sink.add(m + ".qweight", DType::I32, {j.in * bits / 32, j.out}, std::move(qweight));
  sink.add(m + ".qzeros", DType::I32, {groups, j.out * bits / 32}, std::move(qzeros));
  sink.add(m + ".scales", DType::F16, {groups, j.out}, std::move(scales));
  sink.add(m + ".g_idx", DType::I32, {j.in}, std::move(g_idx));
}

void emit_awq(Sink& sink, const LinearJob& j, const Matrix* w) {
  const std::string& m = j.module;
  uint64_t groups = ceil_div(j.in, kGroup);
  std::vector<uint8_t> qweight, qzeros, scales;
  if (w) {
    IntQuantized q = quantize_int(*w, 4, kGroup, false, ScaleStorage::f16);
    qweight = bytes_of(pack_awq_rows(transpose(q.codes, j.out, j.in), j.in, j.out));
    qzeros = bytes_of(pack_awq_rows(transpose(q.zeros, j.out, groups), groups, j.out));
    scales = bytes_as(transpose(q.scales, j.out, groups), ScaleStorage::f16);
  }
  sink.add(m + ".qweight", DType::I32, {j.in, j.out / 8}, std::move(qweight));
  sink.add(m + ".qzeros", DType::I32, {groups, j.out / 8}, std::move(qzeros));
  sink.add(m + ".scales", DType::F16, {groups, j.out}, std::move(scales));
}

// ---- config builders ---------------------------------------------------------------------

// compressed-tensors QuantizationArgs as serialized in config.json.
json ct_args(int bits, const char* type, const char* strategy, json group_size, bool symmetric, json dynamic,
             json actorder = nullptr, json block_structure = nullptr) {
  bool is_dynamic = !(dynamic.is_boolean() && !dynamic.get<bool>());
  return json{{"actorder", actorder},
              {"block_structure", block_structure},
              {"dynamic", dynamic},
              {"group_size", group_size},
              {"num_bits", bits},
              {"observer", is_dynamic ? json(nullptr) : json("minmax")},
              {"observer_kwargs", json::object()},
              {"strategy", strategy},
              {"symmetric", symmetric},
              {"type", type}};
}

// An fnmatch pattern of Unquantized::patterns as a compressed-tensors `re:` ignore entry.
std::string ct_regex(const std::string& fnmatch_pattern) {
  std::string re = "re:";
  for (char ch : fnmatch_pattern) {
    if (ch == '*') re += ".*";
    else if (ch == '.') re += "\\.";
    else re += ch;
  }
  return re;
}

json ct_config(const char* format, json weights, json input_activations, const Unquantized& u) {
  json ignore = {"lm_head", "re:.*" + u.router_suffix + "$"};
  for (const auto& p : u.patterns) ignore.push_back(ct_regex(p));
  return json{{"config_groups",
               {{"group_0",
                 {{"format", format},
                  {"input_activations", input_activations},
                  {"output_activations", nullptr},
                  {"targets", {"Linear"}},
                  {"weights", weights}}}}},
              {"format", format},
              {"global_compression_ratio", nullptr},
              {"ignore", ignore},
              {"kv_cache_scheme", nullptr},
              {"quant_method", "compressed-tensors"},
              {"quantization_status", "compressed"},
              {"sparsity_config", json::object()},
              {"transform_config", json::object()},
              {"version", "0.12.2"}};
}

const char* modelopt_algo(Scheme s) {
  switch (s) {
    case Scheme::mo_nvfp4: return "NVFP4";
    case Scheme::mo_w4a16_nvfp4: return "W4A16_NVFP4";
    case Scheme::mo_fp8: return "FP8";
    case Scheme::mo_mxfp8: return "MXFP8";
    default: return "";
  }
}

std::vector<std::string> modelopt_excludes(const Unquantized& u) {
  std::vector<std::string> excludes = {u.lm_head, u.layers_glob + u.router_suffix};
  excludes.insert(excludes.end(), u.patterns.begin(), u.patterns.end());
  return excludes;
}

json modelopt_config(Scheme s, const Unquantized& u) {
  json weights, input;
  switch (s) {
    case Scheme::mo_nvfp4:
    case Scheme::mo_w4a16_nvfp4:
      weights = {{"dynamic", false}, {"group_size", 16}, {"num_bits", 4}, {"type", "float"}};
      input = weights;
      break;
    case Scheme::mo_fp8:
      weights = {{"dynamic", false}, {"num_bits", 8}, {"type", "float"}};
      input = weights;
      break;
    default:  // MXFP8: E8M0 per 32, activations quantized on the fly
      weights = {{"dynamic", false}, {"group_size", 32}, {"num_bits", 8}, {"type", "float"}};
      input = {{"dynamic", true}, {"group_size", 32}, {"num_bits", 8}, {"type", "float"}};
      break;
  }
  json group = {{"targets", {"Linear"}}, {"weights", weights}};
  if (s != Scheme::mo_w4a16_nvfp4) group["input_activations"] = input;
  return json{{"config_groups", {{"group_0", group}}},
              {"ignore", modelopt_excludes(u)},
              {"kv_cache_scheme", nullptr},
              {"producer", {{"name", "modelopt"}, {"version", "0.37.0"}}},
              {"quant_algo", modelopt_algo(s)},
              {"quant_method", "modelopt"}};
}

// AMD Quark QuantizationSpec as exported.
json quark_spec(const char* dtype, const char* qscheme, bool dynamic) {
  bool mx = std::string(qscheme) == "per_group";
  return json{{"ch_axis", mx ? json(-1) : json(nullptr)},
              {"dtype", dtype},
              {"group_size", mx ? json(32) : json(nullptr)},
              {"is_dynamic", dynamic},
              {"mx_element_dtype", nullptr},
              {"observer_cls", mx ? "PerBlockMXObserver" : "PerTensorMinMaxObserver"},
              {"qscheme", qscheme},
              {"round_method", "half_even"},
              {"scale_calculation_mode", mx ? json("even") : json(nullptr)},
              {"scale_format", mx ? json("e8m0") : json(nullptr)},
              {"scale_type", "float"},
              {"symmetric", mx ? json(nullptr) : json(true)}};
}

json quark_config(Scheme s, const Unquantized& u) {
  json weight, input;
  switch (s) {
    case Scheme::quark_w_mxfp4: weight = quark_spec("fp4", "per_group", false); input = nullptr; break;
    case Scheme::quark_w_mxfp4_a_fp8: weight = quark_spec("fp4", "per_group", false); input = quark_spec("fp8_e4m3", "per_tensor", false); break;
    case Scheme::quark_w_mxfp4_a_mxfp4: weight = quark_spec("fp4", "per_group", false); input = quark_spec("fp4", "per_group", true); break;
    default: weight = quark_spec("fp6_e3m2", "per_group", false); input = quark_spec("fp6_e3m2", "per_group", true); break;
  }
  std::vector<std::string> exclude = u.routers;
  exclude.push_back("lm_head");
  exclude.insert(exclude.end(), u.patterns.begin(), u.patterns.end());
  return json{{"algo_config", nullptr},
              {"exclude", exclude},
              {"export",
               {{"kv_cache_group", json::array()},
                {"min_kv_scale", 0.0},
                {"pack_method", "reorder"},
                {"weight_format", "real_quantized"},
                {"weight_merge_groups", nullptr}}},
              {"global_quant_config",
               {{"bias", nullptr}, {"input_tensors", input}, {"output_tensors", nullptr}, {"target_device", nullptr}, {"weight", weight}}},
              {"layer_quant_config", json::object()},
              {"layer_type_quant_config", json::object()},
              {"quant_method", "quark"},
              {"quant_mode", "eager_mode"},
              {"version", "0.10"}};
}

json gptq_config(Scheme s) {
  return json{{"bits", s == Scheme::gptq_int8 ? 8 : 4},
              {"checkpoint_format", "gptq"},
              {"damp_percent", 0.01},
              {"desc_act", s == Scheme::gptq_int4_desc_act},
              {"group_size", kGroup},
              {"lm_head", false},
              {"quant_method", "gptq"},
              {"static_groups", false},
              {"sym", true},
              {"true_sequential", true}};
}

}  // namespace

float activation_amax(uint64_t seed, const std::string& key) {
  Rng rng(derive_seed(seed, key + ".activation"));
  return 1.0f + 7.0f * rng.uniform();
}

void Sink::add(std::string name, DType dtype, std::vector<uint64_t> shape, std::vector<uint8_t> bytes) {
  if (with_data_ && bytes.size() != byte_size(dtype, shape))
    throw_internal("synth: tensor `" + name + "` got " + std::to_string(bytes.size()) + " bytes for " + shape_string(shape));
  if (!with_data_) bytes.clear();
  tensors_.push_back({std::move(name), dtype, std::move(shape), std::move(bytes)});
}

bool scheme_quantizes_attention(Scheme s) {
  return s != Scheme::bf16 && s != Scheme::gpt_oss_mxfp4 && s != Scheme::deepseek_v4_fp4 && s != Scheme::deepseek_v4_nvfp4 &&
         s != Scheme::deepseek_v4_fp8;
}

// compressed-tensors MXFP4: weight_packed (two E2M1 codes a byte) + weight_scale (E8M0 per 32).
void emit_ct_mxfp4(Sink& sink, const LinearJob& j, const Matrix* w) {
  std::vector<uint8_t> packed, scales;
  if (w) {
    MxQuantized q = quantize_mx(*w, MxElement::e2m1);
    packed = pack_nibbles(q.codes);
    scales = std::move(q.scales);
  }
  sink.add(j.module + ".weight_packed", DType::U8, {j.out, j.in / 2}, std::move(packed));
  sink.add(j.module + ".weight_scale", DType::U8, {j.out, j.in / 32}, std::move(scales));
}

// compressed-tensors int-quantized: the signed integer values themselves (the unsigned code less
// its symmetric zero point), one per I8 byte, int4 included (ERRATA 14: no packing); BF16
// scales per `group` columns (0: one per row).
void emit_ct_int_quantized(Sink& sink, const LinearJob& j, const Matrix* w, int bits, uint64_t group) {
  std::vector<uint8_t> codes, scales;
  if (w) {
    IntQuantized q = quantize_int(*w, bits, group, true, ScaleStorage::bf16);
    codes = int8_bytes(q.codes, 1 << (bits - 1));
    scales = bytes_as(q.scales, ScaleStorage::bf16);
  }
  sink.add(j.module + ".weight", DType::I8, {j.out, j.in}, std::move(codes));
  sink.add(j.module + ".weight_scale", DType::BF16, {j.out, group ? ceil_div(j.in, group) : uint64_t{1}}, std::move(scales));
}

void emit_linear(Sink& sink, Scheme scheme, const LinearJob& j, const Matrix* w, float pair_amax, uint64_t seed) {
  if (j.role == LinearRole::attention && !scheme_quantizes_attention(scheme)) scheme = Scheme::bf16;
  switch (scheme) {
    case Scheme::bf16:
      sink.add(j.module + ".weight", DType::BF16, {j.out, j.in}, w ? bf16_bytes(*w) : std::vector<uint8_t>{});
      return;
    case Scheme::ct_nvfp4: return emit_ct_nvfp4(sink, j, w, pair_amax, true, seed);
    case Scheme::ct_nvfp4a16: return emit_ct_nvfp4(sink, j, w, pair_amax, false, seed);
    case Scheme::ct_mxfp4: return emit_ct_mxfp4(sink, j, w);
    case Scheme::ct_w4a16: return emit_ct_packed(sink, j, w, 4, kGroup, true, false, seed);
    case Scheme::ct_w4a16_asym: return emit_ct_packed(sink, j, w, 4, kGroup, false, false, seed);
    case Scheme::ct_w4a16_actorder: return emit_ct_packed(sink, j, w, 4, kGroup, true, true, seed);
    case Scheme::ct_w8a16: return emit_ct_packed(sink, j, w, 8, 0, true, false, seed);
    case Scheme::ct_w4a8_fp8: return emit_ct_packed(sink, j, w, 4, kGroup, true, false, seed);
    case Scheme::ct_w4a8_int8: return emit_ct_int_quantized(sink, j, w, 4, kGroup);
    case Scheme::ct_fp8_tensor:
      emit_fp8(sink, j, w, Fp8Granularity::tensor, ScaleStorage::bf16, "weight_scale", {1}, false, DType::BF16);
      sink.add(j.module + ".input_scale", DType::BF16, {1},
               w ? bytes_as({activation_amax(seed, input_key(j.key)) / 448.0f}, ScaleStorage::bf16) : std::vector<uint8_t>{});
      return;
    case Scheme::ct_fp8_channel:
      return emit_fp8(sink, j, w, Fp8Granularity::channel, ScaleStorage::bf16, "weight_scale", {}, false, DType::BF16);
    case Scheme::ct_fp8_block:
      return emit_fp8(sink, j, w, Fp8Granularity::block, ScaleStorage::bf16, "weight_scale", {}, false, DType::BF16);
    case Scheme::ct_w8a8_int8: return emit_ct_int_quantized(sink, j, w, 8, 0);
    case Scheme::mo_nvfp4: return emit_mo_nvfp4(sink, j, w, pair_amax, true, seed);
    case Scheme::mo_w4a16_nvfp4: return emit_mo_nvfp4(sink, j, w, pair_amax, false, seed);
    case Scheme::mo_fp8:
      emit_fp8(sink, j, w, Fp8Granularity::tensor, ScaleStorage::f32, "weight_scale", {}, false, DType::F32);
      sink.add(j.module + ".input_scale", DType::F32, {}, w ? f32_scalar(activation_amax(seed, j.key) / 448.0f) : std::vector<uint8_t>{});
      return;
    case Scheme::mo_mxfp8: return emit_mx(sink, j, w, MxElement::e4m3, DType::F8_E4M3, DType::U8, "weight_scale");
    case Scheme::quark_w_mxfp4:
    case Scheme::quark_w_mxfp4_a_mxfp4: return emit_mx(sink, j, w, MxElement::e2m1, DType::U8, DType::U8, "weight_scale");
    case Scheme::quark_w_mxfp4_a_fp8:
      emit_mx(sink, j, w, MxElement::e2m1, DType::U8, DType::U8, "weight_scale");
      sink.add(j.module + ".input_scale", DType::F32, {}, w ? f32_scalar(activation_amax(seed, j.key) / 448.0f) : std::vector<uint8_t>{});
      return;
    case Scheme::quark_w_mxfp6_e3m2: return emit_mx(sink, j, w, MxElement::e3m2, DType::U8, DType::U8, "weight_scale");
    case Scheme::gptq_int4: return emit_gptq(sink, j, w, 4, false, seed);
    case Scheme::gptq_int4_desc_act: return emit_gptq(sink, j, w, 4, true, seed);
    case Scheme::gptq_int8: return emit_gptq(sink, j, w, 8, false, seed);
    case Scheme::awq_int4: return emit_awq(sink, j, w);
    case Scheme::deepseek_fp8_block:
      return emit_fp8(sink, j, w, Fp8Granularity::block, ScaleStorage::f32, "weight_scale_inv", {}, false, DType::F32);
    case Scheme::deepseek_v4_fp4:
      // Routed experts are FP4 bytes typed I8 with F8_E8M0 scales per 32; the shared expert
      // and dense linears are block FP8 with power-of-two (UE8M0) scales, stored as F8_E8M0.
      if (j.role == LinearRole::routed_expert) return emit_mx(sink, j, w, MxElement::e2m1, DType::I8, DType::F8_E8M0, "scale");
      return emit_fp8(sink, j, w, Fp8Granularity::block, ScaleStorage::f32, "scale", {}, true, DType::F8_E8M0);
    case Scheme::deepseek_v4_nvfp4:
      // ERRATA 13: the routed experts carry ModelOpt NVFP4 tensors under the native names; the
      // shared expert and dense linears stay DeepSeek's UE8M0 block FP8.
      if (j.role == LinearRole::routed_expert) return emit_mo_nvfp4(sink, j, w, pair_amax, true, seed);
      return emit_fp8(sink, j, w, Fp8Granularity::block, ScaleStorage::f32, "scale", {}, true, DType::F8_E8M0);
    case Scheme::deepseek_v4_fp8:
      // expert_dtype fp8 (vLLM's DeepseekV4FP8Config: "FP8 block experts with float32 FP8 linear
      // scales"): every linear, routed experts included, is 128x128 block FP8 with F32 scales.
      return emit_fp8(sink, j, w, Fp8Granularity::block, ScaleStorage::f32, "scale", {}, false, DType::F32);
    case Scheme::gpt_oss_mxfp4:
      throw_internal("synth: gpt-oss experts are fused; they are not emitted per linear");
  }
}

void emit_mlp(Sink& sink, Scheme scheme, const LinearJob& gate, const LinearJob& up, const LinearJob& down, uint64_t seed) {
  if (!sink.with_data()) {
    for (const LinearJob* j : {&gate, &up, &down}) emit_linear(sink, scheme, *j, nullptr, 0.0f, seed);
    return;
  }
  Matrix g = linear_source(seed, gate.key, gate.out, gate.in);
  Matrix u = linear_source(seed, up.key, up.out, up.in);
  Matrix d = linear_source(seed, down.key, down.out, down.in);
  // NVFP4 calibration ties the gate and up global scales (vLLM keeps one per w13 and warns
  // when they differ); every other family scales each linear on its own.
  bool tie = scheme == Scheme::ct_nvfp4 || scheme == Scheme::ct_nvfp4a16 || scheme == Scheme::mo_nvfp4 ||
             scheme == Scheme::mo_w4a16_nvfp4 || scheme == Scheme::deepseek_v4_nvfp4;
  float pair = tie ? std::max(abs_max(g), abs_max(u)) : 0.0f;
  emit_linear(sink, scheme, gate, &g, pair, seed);
  emit_linear(sink, scheme, up, &u, pair, seed);
  emit_linear(sink, scheme, down, &d, 0.0f, seed);
}

json quantization_config(Scheme s, const Unquantized& u) {
  switch (s) {
    case Scheme::bf16: return nullptr;
    case Scheme::ct_nvfp4:
    case Scheme::ct_nvfp4a16: {
      json w = ct_args(4, "float", "tensor_group", 16, true, false);
      w["scale_dtype"] = "torch.float8_e4m3fn";
      w["zp_dtype"] = nullptr;
      json a = nullptr;
      if (s == Scheme::ct_nvfp4) {
        a = ct_args(4, "float", "tensor_group", 16, true, "local");
        a["scale_dtype"] = "torch.float8_e4m3fn";
        a["zp_dtype"] = nullptr;
      }
      return ct_config("nvfp4-pack-quantized", w, a, u);
    }
    case Scheme::ct_mxfp4: {
      json w = ct_args(4, "float", "group", 32, true, false);
      w["scale_dtype"] = "torch.uint8";
      w["zp_dtype"] = nullptr;
      return ct_config("mxfp4-pack-quantized", w, nullptr, u);
    }
    case Scheme::ct_w4a16: return ct_config("pack-quantized", ct_args(4, "int", "group", kGroup, true, false), nullptr, u);
    case Scheme::ct_w4a16_asym: return ct_config("pack-quantized", ct_args(4, "int", "group", kGroup, false, false), nullptr, u);
    case Scheme::ct_w4a16_actorder:
      return ct_config("pack-quantized", ct_args(4, "int", "group", kGroup, true, false, "group"), nullptr, u);
    case Scheme::ct_w8a16: return ct_config("pack-quantized", ct_args(8, "int", "channel", nullptr, true, false), nullptr, u);
    case Scheme::ct_w4a8_fp8:
      return ct_config("pack-quantized", ct_args(4, "int", "group", kGroup, true, false),
                       ct_args(8, "float", "token", nullptr, true, true), u);
    case Scheme::ct_fp8_tensor:
      return ct_config("float-quantized", ct_args(8, "float", "tensor", nullptr, true, false),
                       ct_args(8, "float", "tensor", nullptr, true, false), u);
    case Scheme::ct_fp8_channel:
      return ct_config("float-quantized", ct_args(8, "float", "channel", nullptr, true, false),
                       ct_args(8, "float", "token", nullptr, true, true), u);
    case Scheme::ct_fp8_block:
      return ct_config("float-quantized", ct_args(8, "float", "block", nullptr, true, false, nullptr, json::array({kGroup, kGroup})),
                       ct_args(8, "float", "group", kGroup, true, true), u);
    case Scheme::ct_w8a8_int8:
      return ct_config("int-quantized", ct_args(8, "int", "channel", nullptr, true, false),
                       ct_args(8, "int", "token", nullptr, true, true), u);
    case Scheme::ct_w4a8_int8:
      return ct_config("int-quantized", ct_args(4, "int", "group", kGroup, true, false),
                       ct_args(8, "int", "token", nullptr, true, true), u);
    case Scheme::mo_nvfp4:
    case Scheme::mo_w4a16_nvfp4:
    case Scheme::mo_fp8:
    case Scheme::mo_mxfp8: return modelopt_config(s, u);
    case Scheme::quark_w_mxfp4:
    case Scheme::quark_w_mxfp4_a_fp8:
    case Scheme::quark_w_mxfp4_a_mxfp4:
    case Scheme::quark_w_mxfp6_e3m2: return quark_config(s, u);
    case Scheme::gptq_int4:
    case Scheme::gptq_int4_desc_act:
    case Scheme::gptq_int8: return gptq_config(s);
    case Scheme::awq_int4:
      return json{{"bits", 4}, {"group_size", kGroup}, {"modules_to_not_convert", {u.router_suffix}},
                  {"quant_method", "awq"}, {"version", "gemm"}, {"zero_point", true}};
    case Scheme::deepseek_fp8_block:
      return json{{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"}, {"weight_block_size", {kGroup, kGroup}}};
    case Scheme::deepseek_v4_fp8:
      return json{{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"}, {"weight_block_size", {kGroup, kGroup}}};
    case Scheme::deepseek_v4_fp4:
    case Scheme::deepseek_v4_nvfp4: {
      json q = {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"}, {"scale_fmt", "ue8m0"},
                {"weight_block_size", {kGroup, kGroup}}};
      // ERRATA 13: the method stays "fp8"; only this key turns the fp4 experts into NVFP4.
      if (s == Scheme::deepseek_v4_nvfp4) q["moe_quant_algo"] = "NVFP4";
      return q;
    }
    case Scheme::gpt_oss_mxfp4:
      return json{{"modules_to_not_convert", {"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"}},
                  {"quant_method", "mxfp4"}};
  }
  return nullptr;
}

std::map<std::string, std::string> extra_quant_files(Scheme s, const Unquantized& u) {
  std::map<std::string, std::string> files;
  switch (s) {
    case Scheme::mo_nvfp4:
    case Scheme::mo_w4a16_nvfp4:
    case Scheme::mo_fp8:
    case Scheme::mo_mxfp8: {
      // ModelOpt writes this file with insertion-ordered keys and a 4-space indent.
      ojson q = {{"quant_algo", modelopt_algo(s)}, {"kv_cache_quant_algo", nullptr}};
      if (s == Scheme::mo_nvfp4 || s == Scheme::mo_w4a16_nvfp4) q["group_size"] = 16;
      if (s == Scheme::mo_mxfp8) q["group_size"] = 32;
      q["exclude_modules"] = modelopt_excludes(u);
      ojson doc = {{"producer", {{"name", "modelopt"}, {"version", "0.37.0"}}}, {"quantization", q}};
      files["hf_quant_config.json"] = doc.dump(4) + "\n";
      break;
    }
    case Scheme::gptq_int4:
    case Scheme::gptq_int4_desc_act:
    case Scheme::gptq_int8:
      // The legacy AutoGPTQ file, kept beside config.json's quantization_config.
      files["quantize_config.json"] = json_text(gptq_config(s));
      break;
    default: break;
  }
  return files;
}

std::string json_text(const nlohmann::json& j, int indent) { return j.dump(indent) + "\n"; }

}  // namespace moepack::synth
