// Integer weight-only (WNA16) MoE selection (vllm/model_executor/layers/fused_moe/oracle/int_wna16.py
// @ e9d1398d9). Activations are always 16-bit (activation key None).
//
// Priority: CPU -> [CPU]; XPU -> [XPU]; otherwise FLASHINFER_TRTLLM, MARLIN, BATCHED_MARLIN,
// TRITON, HUMMING, EMULATION. Before its classes are checked, each backend must pass
// _backend_incompatibility_reason, which depends on the checkpoint layout (GPTQ, AWQ,
// compressed-tensors, MoeWNA16) and the caller's may_have_zp / may_have_bias /
// allow_tile_padding flags; Marlin also needs check_moe_marlin_supports_config's shapes.
#include <algorithm>
#include <cctype>

#include "lib/core/layout_ids.h"
#include "lib/oracle/family.h"
#include "lib/oracle/oracle.h"

namespace moepack::oracle {

namespace {

using namespace keys;

std::span<const BackendRow> backends() {
  static const BackendRow rows[] = {
      {.name = "MARLIN", .classes = {"MarlinExperts"}},
      {.name = "BATCHED_MARLIN", .classes = {"BatchedMarlinExperts"}},
      {.name = "HUMMING", .classes = {"BatchedHummingGroupedExperts", "HummingGroupedExperts", "HummingIndexedExperts"}},
      {.name = "CPU", .classes = {"CPUExpertsInt4"}},
      {.name = "FLASHINFER_TRTLLM", .classes = {"TrtLlmMxint4ExpertsMonolithic"}},
      {.name = "TRITON", .classes = {"TritonWNA16Experts"}},
      {.name = "XPU", .classes = {"XPUExpertsWNA16"}},
      {.name = "EMULATION", .classes = {"Int4EmulationTritonExperts"}},
  };
  return rows;
}

std::span<const MoeBackendName> moe_backend_map() {
  static const MoeBackendName rows[] = {
      {"triton", {"TRITON"}}, {"marlin", {"MARLIN"}}, {"humming", {"HUMMING"}}, {"flashinfer_trtllm", {"FLASHINFER_TRTLLM"}}, {"emulation", {"EMULATION"}},
  };
  return rows;
}

// The quantization config object vLLM hands the oracle, by checkpoint layout.
enum class Layout { gptq, awq, compressed_tensors, moe_wna16 };

Layout layout_of(const std::string& method) {
  if (method == "auto_gptq" || method == "gptq" || method == "gptq_marlin") return Layout::gptq;
  if (method == "auto_awq" || method == "awq" || method == "awq_marlin") return Layout::awq;
  if (method == "compressed-tensors") return Layout::compressed_tensors;
  if (method == "moe_wna16") return Layout::moe_wna16;
  raise_value_error("quantization method '" + method + "' has no WNA16 MoE method in vLLM");
}

// check_moe_marlin_supports_config (quantization/utils/marlin_utils.py).
bool marlin_supports(const SelectionContext& ctx, int group_size, bool allow_tile_padding) {
  if (ctx.deployment.device.is_rocm()) return false;
  const int hidden = ctx.moe.hidden_dim;
  const int inter = ctx.moe.intermediate_size_per_partition;
  bool shape_ok;
  if (allow_tile_padding) shape_ok = hidden % 128 == 0 && (group_size <= 0 || inter % group_size == 0);
  else shape_ok = hidden % 128 == 0 && inter % std::max(64, group_size) == 0;
  const bool group_ok = group_size == -1 || group_size == 32 || group_size == 64 || group_size == 128;
  return shape_ok && group_ok;
}

struct Flags {
  bool may_have_zp;
  bool may_have_bias;
  bool allow_tile_padding;
};

Flags flags_for(const MoeLayerQuery& q, Layout layout) {
  // The callers' defaults (compressed_tensors_moe_wna16.py, auto_gptq.py, auto_awq.py, moe_wna16.py).
  Flags f{};
  switch (layout) {
    case Layout::compressed_tensors:
      f = {!q.symmetric, false, !(q.actorder == "group" || q.actorder == "dynamic")};
      break;
    case Layout::gptq: f = {!q.symmetric, true, !q.desc_act}; break;
    case Layout::awq: f = {q.has_zero_points, true, true}; break;
    case Layout::moe_wna16: f = {q.has_zero_points, false, false}; break;
  }
  if (q.may_have_zp) f.may_have_zp = *q.may_have_zp;
  if (q.may_have_bias) f.may_have_bias = *q.may_have_bias;
  if (q.allow_tile_padding) f.allow_tile_padding = *q.allow_tile_padding;
  return f;
}

// _backend_incompatibility_reason: checked before the backend's classes, recorded when it rejects.
std::optional<std::string> incompatibility(const SelectionContext& ctx, const std::string& b) {
  const MoeLayerQuery& q = ctx.query;
  const Layout layout = layout_of(q.quant_method);
  const Flags f = flags_for(q, layout);
  if (b == "FLASHINFER_TRTLLM" && (f.may_have_zp || f.may_have_bias)) return "zero points and bias are not supported";
  if (b == "TRITON") {
    if (f.may_have_bias) return "expert bias is not supported";
    if (layout == Layout::awq) return "the AutoAWQ weight layout is not supported";
    if (layout == Layout::gptq && q.desc_act) return "GPTQ activation ordering is not supported";
    // Only "group" act-order is rejected; "dynamic" passes (as coded upstream).
    if (layout == Layout::compressed_tensors && q.actorder == "group") return "group activation ordering is not supported";
  }
  const bool marlin = b == "MARLIN" || b == "BATCHED_MARLIN";
  if (layout != Layout::moe_wna16 && marlin && !marlin_supports(ctx, q.group_size, f.allow_tile_padding))
    return "Marlin not supported for this layer";
  if (layout == Layout::moe_wna16 && (marlin || b == "EMULATION")) return "the MoeWNA16 checkpoint layout is not supported";
  return std::nullopt;
}

bool on_cpu(const SelectionContext& c, const Request&) { return c.deployment.device.is_cpu(); }
bool on_xpu(const SelectionContext& c, const Request&) { return c.deployment.device.is_xpu(); }

const Selector& wna16_selector() {
  static const Selector s{
      .backends = backends(),
      .moe_backend_map = moe_backend_map(),
      .map_name = "WNA16",
      .priority = {{on_cpu, {"CPU"}},
                   {on_xpu, {"XPU"}},
                   {nullptr, {"FLASHINFER_TRTLLM", "MARLIN", "BATCHED_MARLIN", "TRITON", "HUMMING", "EMULATION"}}},
      .filters = {{.rejects = incompatibility, .shown = true}},
      .forced_refusal = [](const std::string& v, const std::string& r) { return unsupported_message("WNA16", v, r, true); },
      .none_fit = [](SelectionContext&, const Request&, const AutoWalk&) -> Selection {
        raise_not_implemented("No WNA16 MoE backend supports the deployment configuration.");
      },
  };
  return s;
}

// The weight key the method was given, after the checkpoint layout is known to have a method.
OptKey method_weight_key(const MoeLayerQuery& q) {
  layout_of(q.quant_method);
  return q.weight_key_value ? q.weight_key_value : quant_key_by_name(q.weight_key);
}

// What the methods raise once a backend is chosen. CompressedTensorsWNA16MoEMethod.__init__
// asserts, for every backend but Marlin's, a group strategy and no "group" act-order (both
// asserts carry no message). On CPU, `_process_weights_cpu` (process_weights_after_loading)
// raises NotImplementedError for GPTQ act-order and TypeError for MoeWNA16's config (it takes
// AutoAWQ's, AutoGPTQ's and compressed-tensors' only).
void method_raises_after_selection(const MoeLayerQuery& q, const Selection& s) {
  const Layout layout = layout_of(q.quant_method);
  const bool marlin = s.backend == "MARLIN" || s.backend == "BATCHED_MARLIN";
  if (layout == Layout::compressed_tensors && !marlin && (q.group_size == -1 || q.actorder == "group")) throw OracleRaise("AssertionError", "");
  if (layout == Layout::gptq && q.desc_act && s.backend == "CPU")
    raise_not_implemented("CPU WNA16 MoE backend does not support GPTQ with desc_act=True. The fused MoE kernel has no g_idx reordering support.");
  if (layout == Layout::moe_wna16 && s.backend == "CPU")
    throw OracleRaise("TypeError", "CPU WNA16 MoE backend requires AutoAWQConfig, AutoGPTQConfig or QuantizationArgs, got MoeWNA16Config.");
}

Selection select_wna16(SelectionContext& ctx) {
  Selection s = select_backend(wna16_selector(), ctx, {method_weight_key(ctx.query), std::nullopt, ctx.activation_format(), {}});
  method_raises_after_selection(ctx.query, s);
  return s;
}

// CompressedTensorsW4A16FlydslMoEMethod (chosen by the method switch below, as vLLM's
// get_moe_method does): no oracle, its apply calls fused_flydsl_moe; its constructor asserts
// what the kernel supports.
Selection select_flydsl(SelectionContext& ctx) {
  const MoeLayerQuery& q = ctx.query;
  const OptKey w = method_weight_key(q);
  if (q.actorder == "group") throw OracleRaise("AssertionError", "");
  if (!q.symmetric) throw OracleRaise("AssertionError", "Only symmetric quantization is supported for MoE. Try --moe-backend emulation.");
  ctx.candidates.push_back({"FLYDSL", "fused_flydsl_moe", true, ""});
  return Selection{"FLYDSL", "fused_flydsl_moe", w, std::nullopt};
}

// compressed-tensors on ROCm (CompressedTensorsMoEMethod.get_moe_method): 4-bit INT group-32
// weights on gfx950 with --moe-backend flydsl and no LoRA get the FlyDSL W4A16 method. (The
// native RDNA3 method before it needs gfx1100, not a target here.)
bool flydsl_method(const MoeLayerQuery& q, const Deployment& dep) {
  return q.quant_method == "compressed-tensors" && dep.device.is_rocm() && dep.device.on_gfx950() && dep.moe_backend == "flydsl" &&
         q.weight_bits == 4 && q.group_size == 32 && !dep.lora;
}

// Each method builds its weight key from the checkpoint's bits and group size.
void derive_weight_key(MoeLayerQuery& q) {
  if (!q.weight_key.empty() || q.weight_key_value) return;
  const std::string& m = q.quant_method;
  if (m == "auto_gptq" || m == "gptq" || m == "gptq_marlin") {
    if (q.weight_bits != 4 && q.weight_bits != 8) throw OracleRaise("ValueError", "AutoGPTQMoEMethod only supports int4 and int8 now.");
    q.weight_key_value = q.weight_bits == 4 ? kInt4Static : kInt8Static;
  } else if (m == "auto_awq" || m == "awq" || m == "awq_marlin") {
    if (q.weight_bits != 4) throw OracleRaise("ValueError", "AutoAWQMoEMethod only supports 4bit now.");
    q.weight_key_value = kInt4Static;
  } else if (m == "moe_wna16") {
    if (q.weight_bits == 4) q.weight_key_value = q.group_size == 32 ? kInt4Static32 : kInt4Static;
    else if (q.weight_bits == 8) q.weight_key_value = kInt8Static;
    else throw OracleRaise("ValueError", "MoeWNA16Method only supports int4 and int8 now.");
  } else {
    auto k = wna16_weight_key(q.weight_bits, q.group_size, q.symmetric);
    if (!k) throw OracleRaise("ValueError", "compressed-tensors WNA16 MoE supports 2, 3, 4 and 8 bits (zero points: 4 and 8), got " +
                                                std::to_string(q.weight_bits));
    q.weight_key_value = k;
  }
}

// The conversion padding of sizes_layouts.h, step 2.
std::pair<int, int> conversion_padding(const SelectionContext& ctx, const Selection& s, int hidden, int inter) {
  if (s.backend == "MARLIN" || s.backend == "BATCHED_MARLIN") return {hidden, marlin_moe_padded_intermediate(inter, ctx.query.group_size)};
  return {hidden, inter};
}

// ---- Marlin (MARLIN, BATCHED_MARLIN): _process_weights_marlin / _process_awq_weights_marlin ----
// Ids are packers/registry.cpp's (packers/marlin_wna16.h) plus the per-expert derivations of
// lib/convert/wna16_marlin.h (act-order sort, vLLM's empty [E, 0] placeholders). The parameter
// names are the method's: AutoGPTQ / AutoAWQ keep w13_qweight, w13_scales, w13_qzeros, w13_g_idx;
// compressed-tensors w13_weight_packed, w13_weight_scale, w13_weight_zero_point, w13_weight_g_idx.
// Every method adds w13_g_idx_sort_indices / w2_g_idx_sort_indices.

bool marlin_8bit_input(const SelectionContext& c) {
  auto v = c.deployment.env.get("VLLM_MARLIN_INPUT_DTYPE");
  if (!v) return false;
  std::string lower = *v;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return lower == "fp8" || lower == "int8";
}

std::string dtype_id(FloatType t) {
  switch (t) {
    case FloatType::bfloat16: return "BF16";
    case FloatType::float16: return "F16";
    case FloatType::float32: return "F32";  // no registered Marlin scale layout: refused by the converter
  }
  return "?";
}

using Roles = std::vector<std::pair<std::string, std::string>>;

// The method's parameter names: AutoGPTQ / AutoAWQ keep qweight, scales, qzeros, g_idx;
// compressed-tensors weight_packed, weight_scale, weight_zero_point, weight_g_idx.
struct ParamNames {
  std::string weight, scale, zeros, g_idx;
};
ParamNames param_names(bool compressed_tensors) {
  if (compressed_tensors) return {"weight_packed", "weight_scale", "weight_zero_point", "weight_g_idx"};
  return {"qweight", "scales", "qzeros", "g_idx"};
}

// The w13_ and w2_ roles of one parameter, with one layout id.
void add_both(Roles& r, const std::string& param, std::string_view id) {
  r.push_back({"w13_" + param, std::string(id)});
  r.push_back({"w2_" + param, std::string(id)});
}

Roles marlin_roles(const SelectionContext& c, const Selection&) {
  const MoeLayerQuery& q = c.query;
  const Layout layout = layout_of(q.quant_method);
  if (marlin_8bit_input(c)) {
    // marlin_int4_fp8_preprocess / marlin_act_int8_process_scales are not reproduced: ids no
    // packer has, so the converter refuses the layer by name.
    const std::string w = layout_id::not_reproduced(layout_id::head::marlin_int4_fp8_preprocess_or_act_int8, "VLLM_MARLIN_INPUT_DTYPE");
    return {{layout == Layout::compressed_tensors ? "w13_weight_packed" : "w13_qweight", w}};
  }
  const int bits = q.weight_bits, gs = q.group_size;
  const int inter = c.moe.intermediate_size_per_partition;
  const FloatType dtype = c.deployment.model_dtype;
  // marlin_permute_scales: grouped iff group_size != -1 and group_size < size_k. w13 always gets
  // size_k = intermediate_size_per_partition (ERRATA 9); AWQ's w2 too; GPTQ / compressed-tensors
  // w2 get size_k = (w2 scale rows) * group_size, i.e. grouped iff there is more than one row.
  const int padded = marlin_moe_padded_intermediate(inter, gs);
  const bool w13_grouped = gs != -1 && gs < inter;
  // With act-order the w2 scales are loaded whole (load_full_w2): I / group_size rows.
  const bool full_w2 = layout == Layout::compressed_tensors ? q.actorder == "group" : (layout == Layout::gptq && q.desc_act);
  const int w2_rows = gs > 0 ? (full_w2 ? q.moe_intermediate_size : padded) / gs : 1;
  const bool w2_grouped = layout == Layout::awq ? (gs != -1 && gs < inter) : (gs != -1 && w2_rows > 1);
  using layout_id::IntPacking;
  using layout_id::marlin_int_repack;
  using layout_id::marlin_moe_permute_scales;
  using layout_id::marlin_zero_points;
  const std::string empty = layout_id::empty_int32_per_expert();
  Roles r;
  if (layout == Layout::awq) {
    r = {{"w13_qweight", marlin_int_repack(IntPacking::awq, bits)}, {"w2_qweight", marlin_int_repack(IntPacking::awq, bits)},
         {"w13_scales", marlin_moe_permute_scales(w13_grouped, dtype_id(dtype))}, {"w2_scales", marlin_moe_permute_scales(w2_grouped, dtype_id(dtype))},
         {"w13_qzeros", marlin_zero_points(IntPacking::awq, bits)}, {"w2_qzeros", marlin_zero_points(IntPacking::awq, bits)},
         {"w13_g_idx_sort_indices", empty}, {"w2_g_idx_sort_indices", empty}};
  } else {
    const bool ct = layout == Layout::compressed_tensors;
    const bool act_order = ct ? q.actorder == "group" : q.desc_act;
    const auto [weight, scale, zeros, g_idx] = param_names(ct);
    const std::string repack = marlin_int_repack(IntPacking::gptq, bits);
    const std::string w = act_order ? layout_id::pipeline({layout_id::marlin_act_order_rows(), repack}) : repack;
    r = {{"w13_" + weight, w},
         {"w2_" + weight, w},
         {"w13_" + scale, marlin_moe_permute_scales(w13_grouped, dtype_id(dtype))},
         {"w2_" + scale, marlin_moe_permute_scales(w2_grouped, dtype_id(dtype))}};
    // GPTQ loads qzeros whatever `sym` says and converts them (ERRATA 6); compressed-tensors
    // registers zero points only when asymmetric.
    if (!ct || !q.symmetric) {
      add_both(r, zeros, marlin_zero_points(IntPacking::gptq, bits));
    }
    add_both(r, g_idx, act_order ? layout_id::marlin_sort_g_idx(false) : empty);
    add_both(r, "g_idx_sort_indices", act_order ? layout_id::marlin_sort_g_idx(true) : empty);
    if (ct) {
      add_both(r, "weight_shape", layout_id::unchanged);
    }
  }
  if (q.has_bias) {
    add_both(r, "bias", layout_id::marlin_permute_bias(dtype == FloatType::bfloat16 ? "bf16" : dtype_id(dtype)));
  }
  return r;
}

// HUMMING's weights are prepared by the external humming package, FLYDSL's and EMULATION's by
// their own kernels' code, none of it at this reference: one id no packer has, under the
// method's weight name, so the converter refuses the layer naming it.
Roles prepared_elsewhere_roles(const SelectionContext& c, const Selection& s) {
  const bool ct = layout_of(c.query.quant_method) == Layout::compressed_tensors;
  return {{ct ? "w13_weight_packed" : "w13_qweight", layout_id::backend_prepared_weights(s.backend)}};
}

// TRITON for MoeWNA16 (moe_wna16.py `MoeWNA16Method` @ e9d1398d9). Its weight loader converts
// while loading and convert_to_wna16_moe_kernel_format's TRITON branch keeps what it loaded (a
// uint8 view), so the layouts are the loader's:
//   GPTQ     qweight `.T.contiguous().view(torch.uint8)`: the AutoGPTQ Triton bytes
//            (packers/triton_wna16.h); g_idx is never loaded and, without zero points (has_zp =
//            not sym), neither are qzeros: both stay create_weights' empty (0,) int32 parameters.
//   AutoAWQ  qweight and qzeros through convert_awq_tensor (packers/moe_wna16_awq.h); without
//            zero points no qzeros parameter exists and the loader skips them.
//   scales   `.T` into parameters of the model dtype.
// Scales and zero points repeat each group group_size_div_factor times before the rank's slice
// (the loader's part: lib/convert/wna16_marlin.h). MoeWNA16 registers no bias parameters, and
// GPTQ zero points it would load (sym false) the checkpoint reader already refuses.
Roles moe_wna16_triton_roles(const SelectionContext& c) {
  const MoeLayerQuery& q = c.query;
  const std::string scales = layout_id::moe_wna16_scales();
  if (q.has_bias)
    return {{"w13_qweight", layout_id::not_reproduced(layout_id::head::moe_wna16, "expert biases: MoeWNA16Method registers no bias parameter")}};
  if (q.linear_quant_method == "awq") {
    const std::string qweight = layout_id::moe_wna16_awq_qweight();
    Roles r = {{"w13_qweight", qweight}, {"w2_qweight", qweight}, {"w13_scales", scales}, {"w2_scales", scales}};
    const std::string zeros = q.has_zero_points ? layout_id::moe_wna16_awq_qzeros() : "dropped";
    add_both(r, "qzeros", zeros);
    return r;
  }
  if (q.has_zero_points) return {{"w13_qzeros", layout_id::not_reproduced(layout_id::head::moe_wna16, "GPTQ zero points plus one")}};
  const std::string w = layout_id::wna16_triton_weight();
  Roles r = {{"w13_qweight", w}, {"w2_qweight", w}, {"w13_scales", scales}, {"w2_scales", scales}};
  // One (0,) tensor for the layer.
  add_both(r, "qzeros", layout_id::empty_int32());
  add_both(r, "g_idx", layout_id::empty_int32());
  return r;
}

// TRITON (int_wna16.py `convert_to_wna16_moe_kernel_format`, TRITON branch): GPTQ and
// compressed-tensors params turned N-first (packers/triton_wna16.h); g_idx and the sort indices
// are set to None; biases and compressed-tensors' weight_shape stay.
Roles triton_roles(const SelectionContext& c, const Selection&) {
  const MoeLayerQuery& q = c.query;
  const Layout layout = layout_of(q.quant_method);
  if (layout == Layout::moe_wna16) return moe_wna16_triton_roles(c);
  if (layout == Layout::awq)
    return {{"w13_qweight", layout_id::not_reproduced(layout_id::head::wna16_triton_awq_uint8_view, "MoeWNA16 branch on AWQ params")}};
  const bool ct = layout == Layout::compressed_tensors;
  const auto [weight, scale, zeros, g_idx] = param_names(ct);
  const std::string w = layout_id::wna16_triton_weight(), t = layout_id::wna16_triton_transpose(), z = layout_id::wna16_triton_zero_points();
  // Zero points [E, K / group, N / 8] with a single group along K: upstream's
  // transpose(1, 2).contiguous() keeps the [E, N / 8, 1] result as the transposed view (a size-1
  // last dim counts as contiguous, so its stride stays N / 8) and the int32 -> uint8 view that
  // follows raises "self.stride(-1) must be 1 to view Int as Byte". vLLM cannot load such a layer
  // on TRITON (found running the upstream code, tests/golden/make_wna16_goldens.py); no packer has
  // this id, so the layer is refused naming it.
  const std::string fails = layout_id::not_reproduced(layout_id::head::wna16_triton_zero_points,
                                                      "one group along K: upstream's uint8 view of the transposed zero points raises "
                                                      "RuntimeError stride(-1) must be 1");
  const bool asym_groups = ct && !q.symmetric && q.group_size > 0;
  const std::string z13 = asym_groups && c.moe.hidden_dim / q.group_size == 1 ? fails : z;
  const std::string z2 = asym_groups && c.moe.intermediate_size_per_partition / q.group_size == 1 ? fails : z;
  Roles r = {{"w13_" + weight, w}, {"w2_" + weight, w}, {"w13_" + scale, t}, {"w2_" + scale, t},
             {"w13_" + zeros, z13}, {"w2_" + zeros, z2}, {"w13_" + g_idx, "dropped"}, {"w2_" + g_idx, "dropped"},
             {"w13_g_idx_sort_indices", "dropped"}, {"w2_g_idx_sort_indices", "dropped"}};
  if (ct) {
    add_both(r, "weight_shape", layout_id::unchanged);
  }
  if (q.has_bias) {
    add_both(r, "bias", layout_id::unchanged);
  }
  return r;
}

// CPU (`_process_weights_cpu` -> prepare_int4_moe_layer_for_cpu -> sgl-kernel's
// convert_weight_packed_scale_zp on w13 and on w2; packers/cpu_sgl_int4.h and the derivations of
// lib/convert/cpu_int4.h). AutoAWQ unpacks with CPUQuantAlgo.AWQ, GPTQ and compressed-tensors with
// CPUQuantAlgo.GPTQ (zero points + 1); without a zero-point param (compressed-tensors symmetric)
// vLLM packs 0x77777777 and registers the result as w13_weight_zero_point all the same. g_idx
// passes through unchanged (the sort indices become None), biases are widened to fp32. The
// weight's block_k is min(K / G, 128) for each projection (get_4bit_block_k_size).
Roles cpu_roles(const SelectionContext& c, const Selection&) {
  const MoeLayerQuery& q = c.query;
  const Layout layout = layout_of(q.quant_method);
  const bool awq = layout == Layout::awq, ct = layout == Layout::compressed_tensors;
  const auto [weight, scale, zeros, g_idx] = param_names(ct);
  const int hidden = c.moe.hidden_dim, inter = c.moe.intermediate_size_per_partition, gs = q.group_size;
  auto block_k = [gs](int k) { return std::min(gs > 0 ? gs : k, 128); };
  const std::string how = awq ? "awq_qzeros" : (ct && q.symmetric) ? "synthetic_0x77777777" : "qzeros_plus_1";
  const layout_id::IntPacking packing = awq ? layout_id::IntPacking::awq : layout_id::IntPacking::gptq;
  auto weight_id = [&](int k) {
    return layout_id::pipeline({layout_id::cpu_sgl_int4_compensation(how), layout_id::cpu_sgl_int4_weight_packed(packing, block_k(k))});
  };
  const std::string zero_id = layout_id::pipeline({layout_id::cpu_sgl_int4_zero_points(how), layout_id::cpu_sgl_int4_blocked_zero_points()});
  const std::string scale_id = layout_id::cpu_sgl_int4_blocked_scales();
  Roles r = {{"w13_" + weight, weight_id(hidden)}, {"w2_" + weight, weight_id(inter)}, {"w13_" + scale, scale_id},
             {"w2_" + scale, scale_id},            {"w13_" + zeros, zero_id},          {"w2_" + zeros, zero_id}};
  if (!awq) {
    add_both(r, g_idx, layout_id::unchanged);
  }
  if (ct) {
    add_both(r, "weight_shape", layout_id::unchanged);
  }
  if (q.has_bias) {
    add_both(r, "bias", layout_id::bias_f32);
  }
  return r;
}

// XPU (int_wna16.py `_process_weights_xpu` and the methods' replacements @ e9d1398d9): int4 weights
// transposed and viewed as bytes (the Triton bytes, packers/triton_wna16.h), group scales
// transposed. GPTQ's g_idx and sort indices become empty [0] tensors and its qzeros stay as
// loaded; compressed-tensors keeps its g_idx / sort-index params as create_weights allocated
// them (torch.empty, never loaded without act-order: no defined bytes, so not written) and its
// weight_shape. The XPU kernel reads no g_idx: an act-order checkpoint would run unpermuted.
Roles xpu_roles(const SelectionContext& c, const Selection&) {
  const MoeLayerQuery& q = c.query;
  const Layout layout = layout_of(q.quant_method);
  const bool ct = layout == Layout::compressed_tensors;
  if (layout != Layout::gptq && !ct) return {{"w13_qweight", layout_id::not_reproduced(layout_id::head::xpu_wna16, q.quant_method + " params")}};
  if (ct ? q.actorder == "group" : q.desc_act)
    return {{ct ? "w13_weight_packed" : "w13_qweight", layout_id::refused(layout_id::head::xpu_wna16, "act-order g_idx unread by xpu_fused_moe")}};
  const auto [weight, scale, zeros, g_idx] = param_names(ct);
  const std::string w = layout_id::xpu_wna16_weight(), t = layout_id::xpu_transpose();
  const std::string index = ct ? "dropped" : layout_id::empty_int32();
  Roles r = {{"w13_" + weight, w}, {"w2_" + weight, w}, {"w13_" + scale, t}, {"w2_" + scale, t},
             {"w13_" + g_idx, index}, {"w2_" + g_idx, index}, {"w13_g_idx_sort_indices", index}, {"w2_g_idx_sort_indices", index}};
  if (!ct || !q.symmetric) {
    add_both(r, zeros, layout_id::unchanged);
  }
  if (ct) {
    add_both(r, "weight_shape", layout_id::unchanged);
  }
  if (q.has_bias) {
    add_both(r, "bias", layout_id::unchanged);
  }
  return r;
}

// The descriptive text of a listing row: an id's head followed by prose.
std::string head_then(std::string_view head, std::string_view text) { return std::string(head) + std::string(text); }

std::span<const LayoutRow> layouts() {
  namespace head = layout_id::head;
  const std::string trtllm_prepared(head::trtllm_gen_mxint4_prepared);
  static const LayoutRow rows[] = {
      {.backend = "*MARLIN",
       .condition_text = "GPTQ / AWQ / compressed-tensors, 16-bit activations (VLLM_MARLIN_INPUT_DTYPE fp8/int8: refused)",
       .roles = {{"w13_qweight | w13_weight_packed",
                  head_then(head::gptq_marlin_repack, " / ") + head_then(head::awq_marlin_repack, " (act-order: rows gathered by the stable g_idx sort)")},
                 {"w13_scales | w13_weight_scale", head_then(head::marlin_moe_permute_scales, " (w13 size_k = intermediate size, ERRATA 9)")},
                 {"w13_qzeros | w13_weight_zero_point",
                  head_then(head::moe_packed_to_marlin_zero_points, " / ") + std::string(head::moe_awq_to_marlin_zero_points)},
                 {"w13_g_idx | w13_weight_g_idx", "sorted g_idx (act-order) or empty [E, 0]"},
                 {"w13_g_idx_sort_indices", "stable argsort of g_idx (act-order) or empty [E, 0]"},
                 {"w13_bias", std::string(head::marlin_permute_bias)}},
       .roles_of = marlin_roles},
      {.backend = "FLASHINFER_TRTLLM",
       .roles = {{"w13_weight", trtllm_prepared}, {"w2_weight", trtllm_prepared}, {"w13_weight_scale", trtllm_prepared}, {"w2_weight_scale", trtllm_prepared}}},
      {.backend = "TRITON",
       .condition_text = "GPTQ / compressed-tensors; MoeWNA16 (--quantization moe_wna16): its loader's N-first bytes",
       .roles = {{"w13_qweight | w13_weight_packed",
                  head_then(head::wna16_triton_weight, " (N-first bytes); MoeWNA16 AutoAWQ: ") + std::string(head::moe_wna16_awq_qweight)},
                 {"w13_scales | w13_weight_scale",
                  head_then(head::wna16_triton_transpose, "; MoeWNA16: ") + head_then(head::moe_wna16_scales, " (groups repeated by group_size_div_factor)")},
                 {"w13_qzeros | w13_weight_zero_point",
                  head_then(head::wna16_triton_zero_points, "; MoeWNA16 AutoAWQ: ") + head_then(head::moe_wna16_awq_qzeros, "; MoeWNA16 GPTQ: empty (0,)")},
                 {"w13_g_idx, sort indices", "dropped (None); MoeWNA16 GPTQ g_idx: empty (0,)"}},
       .roles_of = triton_roles},
      {.backend = "CPU",
       .condition_text = "x86 with AMX (CPUExpertsInt4): sgl convert_weight_packed_scale_zp, AutoAWQ or GPTQ unpacking",
       .roles = {{"w13_qweight | w13_weight_packed",
                  layout_id::pipeline({head::cpu_sgl_int4_compensation, head::cpu_sgl_int4_weight_packed}) + " (block_k = min(group size, 128))"},
                 {"w13_scales | w13_weight_scale", layout_id::call(head::cpu_sgl_int4_blocked_scales, {"f32"})},
                 {"w13_qzeros | w13_weight_zero_point",
                  layout_id::pipeline({head::cpu_sgl_int4_zero_points, head::cpu_sgl_int4_blocked_zero_points}) +
                      " (compressed-tensors symmetric: 0x77777777)"},
                 {"w13_g_idx | w13_weight_g_idx", std::string(layout_id::unchanged)},
                 {"w13_bias", std::string(layout_id::bias_f32)}},
       .roles_of = cpu_roles},
      {.backend = "XPU",
       .condition_text = "GPTQ / compressed-tensors int4 without act-order",
       .roles = {{"w13_qweight | w13_weight_packed", head_then(head::xpu_wna16_weight, " (N-first bytes, as Triton's)")},
                 {"w13_scales | w13_weight_scale", std::string(head::xpu_transpose)},
                 {"w13_g_idx, sort indices", "GPTQ: empty [0]; compressed-tensors: unloaded torch.empty, not written"}},
       .roles_of = xpu_roles},
      {.backend = "*",
       .condition_text = "HUMMING, EMULATION, FLYDSL (CompressedTensorsW4A16FlydslMoEMethod)",
       .roles = {{"w13_weight", "backend_prepared"}, {"w2_weight", "backend_prepared"}, {"w13_weight_scale", "backend_prepared"}, {"w2_weight_scale", "backend_prepared"}},
       .roles_of = prepared_elsewhere_roles},
  };
  return rows;
}

// CompressedTensorsWNA16MoEMethod.create_weights (compressed_tensors_moe_wna16.py @ e9d1398d9):
// group scales must tile the hidden size and, unless act-order loads w2's scales whole
// (_w2_scale_sharding: actorder "group"), the per-partition intermediate size; asymmetric zero
// points are sliced in whole int32 words of 32/bits values.
void ct_wna16_create_weights(const SelectionContext& c, const Selection&) {
  const MoeLayerQuery& q = c.query;
  const int hidden = c.moe.hidden_dim, inter = c.moe.intermediate_size_per_partition, group = q.group_size;
  if (group != -1) {
    if (hidden % group != 0)
      raise_value_error("CompressedTensors WNA16 MoE requires hidden_size (" + std::to_string(hidden) + ") to be divisible by group_size (" +
                        std::to_string(group) + ").");
    const bool load_full_w2 = q.actorder == "group";
    if (!load_full_w2 && inter % group != 0)
      raise_value_error("CompressedTensors WNA16 MoE with static group scales requires the MoE intermediate size per tensor-parallel partition (" +
                        std::to_string(inter) + ") to be divisible by group_size (" + std::to_string(group) +
                        "). Scale groups would otherwise cross TP shard boundaries; use a compatible TP size or enable expert parallelism.");
  }
  if (!q.symmetric) {
    const int packed_factor = 32 / q.weight_bits;
    if ((2 * inter) % packed_factor != 0)
      raise_value_error("CompressedTensors WNA16 MoE: gate+up output channels per TP rank (2 * intermediate_size_per_partition = " +
                        std::to_string(2 * inter) + ") must be divisible by packed_factor (" + std::to_string(packed_factor) +
                        "). Use a TP size where 2 * intermediate_size is divisible by " + std::to_string(packed_factor) + ".");
    if (hidden % packed_factor != 0)
      raise_value_error("CompressedTensors WNA16 MoE: hidden_size (" + std::to_string(hidden) + ") must be divisible by packed_factor (" +
                        std::to_string(packed_factor) + ") for correct ZP unpacking.");
  }
}

// MoeWNA16Method.create_weights (moe_wna16.py @ e9d1398d9): the group-size halving loop's
// assertion, and torch's refusal of the scales of a channel-wise checkpoint (group_size -1 makes
// hidden_size // group_size negative).
void moe_wna16_create_weights(const SelectionContext& c, const Selection&) {
  const int hidden = c.moe.hidden_dim, inter = c.moe.intermediate_size_per_partition, group = c.query.group_size;
  if (group <= 0) {
    const int groups = -hidden;  // hidden_size // -1
    throw OracleRaise("RuntimeError", "Trying to create tensor with negative dimension " + std::to_string(groups) + ": [" +
                                          std::to_string(c.moe.num_local_experts) + ", " + std::to_string(2 * inter) + ", " + std::to_string(groups) + "]");
  }
  if (!moe_wna16_group_size_div_factor(hidden, inter, group)) throw OracleRaise("AssertionError", "");
}

}  // namespace

std::optional<int> moe_wna16_group_size_div_factor(int hidden, int intermediate_per_partition, int group_size) {
  if (group_size <= 0 || hidden <= 0 || intermediate_per_partition <= 0) return std::nullopt;
  int group = group_size, factor = 1;
  while (intermediate_per_partition % group != 0 || hidden % group != 0) {
    group /= 2;
    factor *= 2;
    if (group < 32) return std::nullopt;  // `assert group_size >= 32`, inside the loop
  }
  return factor;
}

const FamilyDescriptor& wna16_family() {
  static const FamilyDescriptor d{
      .family = Family::wna16,
      .name = "wna16",
      .methods =
          {
              {.method_class = "AutoGPTQMoEMethod", .reached_by = {{"auto_gptq"}, {"gptq"}, {"gptq_marlin"}}, .select = select_wna16},
              {.method_class = "AutoAWQMoEMethod", .reached_by = {{"auto_awq"}, {"awq"}, {"awq_marlin"}}, .select = select_wna16},
              {.method_class = "CompressedTensorsWNA16MoEMethod", .reached_by = {{"compressed-tensors"}}, .select = select_wna16, .check_weights = ct_wna16_create_weights},
              {.method_class = "MoeWNA16Method", .reached_by = {{"moe_wna16"}}, .select = select_wna16, .check_weights = moe_wna16_create_weights},
              {.method_class = "CompressedTensorsW4A16FlydslMoEMethod", .select = select_flydsl},
              {.method_class = "", .select = select_wna16},
          },
      .method_switches = {{flydsl_method, Family::wna16, "CompressedTensorsW4A16FlydslMoEMethod", false,
                           "compressed-tensors W4A16 group 32 with --moe-backend flydsl on gfx950: CompressedTensorsW4A16FlydslMoEMethod, "
                           "no oracle; its apply calls fused_flydsl_moe"}},
      .complete_query = derive_weight_key,
      .backends = backends(),
      .moe_backend_map = moe_backend_map(),
      .conversion_padding = conversion_padding,
      .layouts = layouts(),
  };
  return d;
}

}  // namespace moepack::oracle
