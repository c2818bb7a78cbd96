// Integer-activation families (vllm/model_executor/layers/fused_moe/oracle/int8.py, w4a8.py,
// w4a8_int8.py @ e9d1398d9):
//   INT8 W8A8  (kInt8StaticChannelSym x kInt8DynamicTokenSym): TRITON, HUMMING, CPU [Arm, x86+AMX]
//   W4A8 FP8   (kInt4Static x kFp8DynamicTokenSym): CUTLASS only; --moe-backend is not consulted
//   W4A8 INT8  (4-bit weights, dynamic int8 activations inside the kernel): CPU_INT4 on CPU only
#include "lib/core/layout_ids.h"
#include "lib/oracle/family.h"

namespace moepack::oracle {

namespace {

using namespace keys;

OptKey key_or(const std::string& name, const QuantKey& fallback) {
  if (name.empty()) return fallback;
  return quant_key_by_name(name);
}

// ---- INT8 W8A8 ----

std::span<const BackendRow> int8_backends() {
  static const BackendRow rows[] = {
      {.name = "TRITON", .classes = {"TritonExperts"}},
      {.name = "HUMMING", .classes = {"BatchedHummingGroupedExperts", "HummingGroupedExperts", "HummingIndexedExperts"}},
      {.name = "CPU", .classes = {"ArmCPUExpertsInt8", "CPUExpertsInt8"}},
  };
  return rows;
}

std::span<const MoeBackendName> int8_moe_backend_map() {
  static const MoeBackendName rows[] = {{"triton", {"TRITON"}}, {"humming", {"HUMMING"}}};
  return rows;
}

// The auto list is the enum in table order.
const Selector& int8_selector() {
  static const Selector s{
      .backends = int8_backends(),
      .moe_backend_map = int8_moe_backend_map(),
      .map_name = "Int8",
      .forced_refusal = [](const std::string& v, const std::string& r) { return unsupported_message("Int8", v, r, false); },
      .none_fit = [](SelectionContext& ctx, const Request& r, const AutoWalk&) -> Selection {
        raise_not_implemented("No Int8 MoE backend supports the deployment configuration (weight_key=" + ctx.key_text(r.weight_key) +
                              ", activation_key=" + ctx.key_text(r.activation_key) +
                              "). Set `VLLM_LOGGING_LEVEL=DEBUG` to see per-backend unsupported reasons.");
      },
  };
  return s;
}

Selection select_int8(SelectionContext& ctx) {
  return select_backend(int8_selector(), ctx,
                        {key_or(ctx.query.weight_key, kInt8StaticChannelSym), key_or(ctx.query.activation_key, kInt8DynamicTokenSym),
                         ctx.activation_format(), {}});
}

bool arm_int8(const SelectionContext&, const Selection& s) { return s.experts_class == "ArmCPUExpertsInt8"; }
bool x86_int8(const SelectionContext&, const Selection& s) { return s.experts_class == "CPUExpertsInt8"; }

// CPUExpertsInt8.process_weights_after_loading (experts/cpu_moe.py @ e9d1398d9): both weights
// through sgl-kernel's convert_weight_packed (VNNI-4 plus s8s8 compensation sums, lib/convert/cpu_int8.h).
std::vector<std::pair<std::string, std::string>> int8_cpu_roles(const SelectionContext&, const Selection&) {
  const std::string packed = layout_id::pipeline({layout_id::cpu_sgl_s8s8_compensation(), layout_id::cpu_sgl_int8_weight});
  const std::string unchanged(layout_id::unchanged);
  return {{"w13_weight", packed}, {"w2_weight", packed}, {"w13_weight_scale", unchanged}, {"w2_weight_scale", unchanged}};
}

// ArmCPUExpertsInt8.process_weights_after_loading (experts/cpu_moe.py @ e9d1398d9): both weights
// through vLLM's own cpu_prepack_moe_weight_int8(w, "neon") (packers/cpu_prepack_moe.h); the
// per-channel fp32 scales stay as loaded, and CompressedTensorsW8A8Int8MoEMethod creates no biases.
std::span<const LayoutRow> int8_layouts() {
  const std::string unchanged(layout_id::unchanged);
  static const LayoutRow rows[] = {
      {.backend = "CPU",
       .condition_text = "Arm (ArmCPUExpertsInt8)",
       .condition = arm_int8,
       .roles = {{"w13_weight", layout_id::cpu_prepack_moe_weight_int8_neon()}, {"w2_weight", layout_id::cpu_prepack_moe_weight_int8_neon()},
                 {"w13_weight_scale", unchanged}, {"w2_weight_scale", unchanged}}},
      {.backend = "CPU",
       .condition_text = "x86 with AMX (CPUExpertsInt8)",
       .condition = x86_int8,
       .roles = {{"w13_weight", layout_id::pipeline({layout_id::head::cpu_sgl_s8s8_compensation, layout_id::cpu_sgl_int8_weight})},
                 {"w2_weight", "the same"},
                 {"w13_weight_scale", unchanged + " (fp32)"}, {"w2_weight_scale", unchanged + " (fp32)"}},
       .roles_of = int8_cpu_roles},
      {.backend = "TRITON",
       .condition_text = "checkpoint bytes; per-channel scales as fp32 parameters",
       .roles = {{"w13_weight", unchanged}, {"w2_weight", unchanged}, {"w13_weight_scale", unchanged}, {"w2_weight_scale", unchanged}}},
      {.backend = "*",
       .condition_text = "HUMMING: prepared by the external humming package (convert_to_humming_moe_kernel_format)",
       .roles = {{"w13_weight", layout_id::external_package(layout_id::head::humming_kernel_format, "humming")}}},
  };
  return rows;
}

// ---- W4A8 with FP8 activations ----

std::span<const BackendRow> w4a8_backends() {
  static const BackendRow rows[] = {{.name = "CUTLASS", .classes = {"CutlassExpertsW4A8Fp8"}}};
  return rows;
}

const Selector& w4a8_selector() {
  static const Selector s{
      .backends = w4a8_backends(),
      .map_name = "W4A8",
      .ignores_moe_backend = [](const std::string&) { return true; },
      .ignored_note = "the W4A8 (FP8 activation) oracle does not read --moe-backend",
      .forced_refusal = [](const std::string& v, const std::string& r) { return unsupported_message("W4A8", v, r, false); },
      .none_fit = [](SelectionContext&, const Request&, const AutoWalk& walk) -> Selection {
        const std::string reason = walk.rejections.empty() ? "" : walk.rejections.back().second;
        raise_not_implemented("W4A8 MoE backend CUTLASS does not support the deployment configuration: " + (reason.empty() ? "None" : reason) + ".");
      },
  };
  return s;
}

Selection select_w4a8(SelectionContext& ctx) {
  // compressed_tensors_moe_w4a8_fp8.py asserts these before selecting (Python asserts:
  // AssertionError, the second one without a message).
  const MoeLayerQuery& q = ctx.query;
  if (!q.symmetric) throw OracleRaise("AssertionError", "Only symmetric quantization is supported for W4A8 MoE");
  if (q.actorder == "group") throw OracleRaise("AssertionError", "");
  if (q.group_size != 128) throw OracleRaise("AssertionError", "Only group size 128 supported for W4A8 MoE");
  return select_backend(w4a8_selector(), ctx, {kInt4Static, kFp8DynamicTokenSym, ctx.activation_format(), {}});
}

// compressed-tensors picks its W4A8 FP8 method only on SM90 exactly; elsewhere the same
// checkpoint reaches the W4A8 int8 method.
bool not_sm90(const MoeLayerQuery&, const Deployment& dep) { return !dep.device.is_device_capability(90); }

// CompressedTensorsW4A8Fp8MoEMethod.process_weights_after_loading ->
// convert_to_w4a8_moe_kernel_format (oracle/w4a8.py @ e9d1398d9): the int4 weights re-encoded and
// reordered for CUTLASS (packers/cutlass_w4a8.h); the bf16 group scales quantized per row by
// QuantFP8 (dynamic, per token), divided by 8 and re-cast to e4m3, then permuted and packed as
// CUTLASS lookup tables; the row scales times 8 become the fp32 channel scales
// (lib/convert/w4a8_cutlass.h); weight_shape stays. QuantFP8 is a CustomOp: without
// torch.compile (compilation mode NONE) it runs the CUDA kernel dynamic_per_token_scaled_fp8_quant,
// whose IEEE division moepack reproduces; under torch.compile Inductor compiles its
// forward_native, whose `scale.reciprocal()` Triton lowers to PTX div.full.f32, an approximate
// division (measured on an H100, torch 2.11 / Triton 3.6: 17569 of the 32639 scales a bf16 row
// maximum gives get a reciprocal other than the correctly rounded one, and 4103 of 532,701,119
// (maximum, value) pairs another FP8 code; tests/golden/check_w4a8_quant_fp8.py): those bytes
// follow the GPU's approximation, not vLLM's code, and are refused.
std::vector<std::pair<std::string, std::string>> w4a8_cutlass_roles(const SelectionContext& ctx, const Selection&) {
  const std::string weight = layout_id::cutlass_encode_and_reorder_int4b_grouped();
  std::vector<std::pair<std::string, std::string>> r = {{"w13_weight_packed", weight}, {"w2_weight_packed", weight}};
  if (compilation_mode_none(ctx.deployment, ctx.query.architecture)) {
    const std::string scales = layout_id::pipeline({layout_id::w4a8_fp8_group_scales(), layout_id::cutlass_pack_scale_fp8()});
    const std::string channel = layout_id::pipeline({layout_id::w4a8_fp8_channel_scales(), layout_id::unchanged});
    r.insert(r.end(), {{"w13_weight_scale", scales}, {"w2_weight_scale", scales}, {"w13_weight_chan_scale", channel}, {"w2_weight_chan_scale", channel}});
  } else {
    const std::string compiled = layout_id::not_reproduced(layout_id::head::w4a8_fp8_group_scales,
                                                           "QuantFP8 compiled by Inductor: its reciprocal is PTX div.full.f32 and not correctly rounded; "
                                                           "TORCH_COMPILE_DISABLE=1 runs the CUDA kernel");
    r.insert(r.end(), {{"w13_weight_scale", compiled}, {"w2_weight_scale", compiled}});
  }
  const std::string unchanged(layout_id::unchanged);
  r.insert(r.end(), {{"w13_weight_shape", unchanged}, {"w2_weight_shape", unchanged}});
  return r;
}

std::span<const LayoutRow> w4a8_layouts() {
  namespace head = layout_id::head;
  const std::string unchanged(layout_id::unchanged);
  static const LayoutRow rows[] = {
      {.backend = "CUTLASS",
       .condition_text = "scales reproduced when vLLM runs without torch.compile (TORCH_COMPILE_DISABLE=1, breakable CUDA graphs)",
       .roles = {{"w13_weight_packed", std::string(head::cutlass_encode_and_reorder_int4b_grouped)}, {"w2_weight_packed", "the same"},
                 {"w13_weight_scale", layout_id::pipeline({head::w4a8_fp8_group_scales, head::cutlass_pack_scale_fp8}) +
                                          " (QuantFP8's CUDA kernel; compiled: not reproduced)"},
                 {"w2_weight_scale", "the same"},
                 {"w13_weight_chan_scale", std::string(head::w4a8_fp8_channel_scales) + " (fp32 row scales x 8)"}, {"w2_weight_chan_scale", "the same"},
                 {"w13_weight_shape", unchanged}, {"w2_weight_shape", unchanged}},
       .roles_of = w4a8_cutlass_roles},
  };
  return rows;
}

// ---- W4A8 with int8 activations (CPU) ----

std::span<const BackendRow> w4a8_int8_backends() {
  static const BackendRow rows[] = {{.name = "CPU_INT4", .classes = {"CPUExpertsInt4[cpu_int4_moe]"}}};
  return rows;
}

std::span<const MoeBackendName> w4a8_int8_moe_backend_map() {
  static const MoeBackendName rows[] = {{"cpu", {"CPU_INT4"}}};
  return rows;
}

const Selector& w4a8_int8_selector() {
  static const Selector s{
      .backends = w4a8_int8_backends(),
      .moe_backend_map = w4a8_int8_moe_backend_map(),
      .map_name = "W4A8 Int8",
      .forced_refusal = [](const std::string& v, const std::string& r) { return unsupported_message("W4A8 Int8", v, r, false); },
      .none_fit = [](SelectionContext&, const Request&, const AutoWalk&) -> Selection {
        raise_not_implemented("No W4A8 Int8 MoE backend supports the deployment configuration.");
      },
  };
  return s;
}

Selection select_w4a8_int8(SelectionContext& ctx) {
  const MoeLayerQuery& q = ctx.query;
  const int group = q.group_size > 0 ? q.group_size : -1;
  // CompressedTensorsW4A8Int8MoEMethod validates the group size against both dimensions first.
  if (group != -1 && (ctx.moe.hidden_dim % group != 0 || ctx.moe.intermediate_size_per_partition % group != 0))
    raise_value_error("Group size (" + std::to_string(group) + ") must evenly divide both hidden size (" + std::to_string(ctx.moe.hidden_dim) +
                      ") and intermediate size per partition (" + std::to_string(ctx.moe.intermediate_size_per_partition) + ").");
  const OptKey w = q.weight_key_value ? q.weight_key_value : OptKey{w4a8_int8_weight_key(group)};
  if (!ctx.deployment.device.is_cpu()) raise_not_implemented("W4A8 Int8 MoE is only supported on CPU platforms");
  return select_backend(w4a8_int8_selector(), ctx, {w, std::nullopt, ctx.activation_format(), {}});
}

// CPUExpertsInt4 (oracle/w4a8_int8.py `convert_to_w4a8_int8_moe_format` @ e9d1398d9) packs each
// expert with torch.ops.aten._dyn_quant_pack_4bit_weight: with KleidiAI that is KleidiAI's RHS
// packing (qsi4c32p / qsi4cxp with the nr, kr, sr of PyTorch's chosen ukernel), defined in the
// KleidiAI library rather than in vLLM's code, and a PyTorch built without KleidiAI packs another
// format: not reproduced.
std::string kleidiai_packing() {
  return layout_id::not_reproduced(layout_id::head::torch_dyn_quant_pack_4bit_weight, "KleidiAI RHS packing defined by the KleidiAI library");
}
std::span<const LayoutRow> w4a8_int8_layouts() {
  static const LayoutRow rows[] = {
      {.backend = "CPU_INT4",
       .roles = {{"w13_weight", kleidiai_packing()}, {"w2_weight", kleidiai_packing()}}},
  };
  return rows;
}

}  // namespace

const FamilyDescriptor& int8_family() {
  static const FamilyDescriptor d{
      .family = Family::int8,
      .name = "int8",
      .methods =
          {
              {.method_class = "CompressedTensorsW8A8Int8MoEMethod", .reached_by = {{"compressed-tensors"}}, .select = select_int8},
              {.method_class = "QuarkW8A8Int8MoEMethod", .reached_by = {{"quark"}}, .select = select_int8},
              {.method_class = "Int8OnlineMoEMethod", .reached_by = {{"experts_int8"}, {"online"}}, .select = select_int8},
              {.method_class = "", .select = select_int8},
          },
      .backends = int8_backends(),
      .moe_backend_map = int8_moe_backend_map(),
      .layouts = int8_layouts(),
  };
  return d;
}

namespace {

// CompressedTensorsW4A8Fp8MoEMethod.create_weights (compressed_tensors_moe_w4a8_fp8.py @ e9d1398d9)
// asserts both sizes divisible by 256 (CUTLASS's reorder_tensor tiles), before any weight loads.
void w4a8_fp8_create_weights(int, int, int padded_hidden, int padded_intermediate) {
  if (padded_hidden % 256 != 0) throw OracleRaise("AssertionError", "hidden_size=" + std::to_string(padded_hidden) + " must be divisible by 256");
  if (padded_intermediate % 256 != 0)
    throw OracleRaise("AssertionError", "intermediate_size_per_partition=" + std::to_string(padded_intermediate) + " must be divisible by 256");
}

}  // namespace

const FamilyDescriptor& w4a8_family() {
  static const FamilyDescriptor d{
      .family = Family::w4a8,
      .name = "w4a8",
      .methods =
          {
              {.method_class = "CompressedTensorsW4A8Fp8MoEMethod", .reached_by = {{"compressed-tensors"}}, .select = select_w4a8,
               .check_sizes = w4a8_fp8_create_weights},
              {.method_class = "", .select = select_w4a8, .check_sizes = w4a8_fp8_create_weights},
          },
      .method_switches = {{not_sm90, Family::w4a8_int8, "CompressedTensorsW4A8Int8MoEMethod", true,
                           "compressed-tensors W4A8 with FP8 activations uses CompressedTensorsW4A8Fp8MoEMethod only on SM90; "
                           "this device gets CompressedTensorsW4A8Int8MoEMethod"}},
      .backends = w4a8_backends(),
      .layouts = w4a8_layouts(),
  };
  return d;
}

const FamilyDescriptor& w4a8_int8_family() {
  static const FamilyDescriptor d{
      .family = Family::w4a8_int8,
      .name = "w4a8_int8",
      .methods =
          {
              {.method_class = "CompressedTensorsW4A8Int8MoEMethod", .reached_by = {{"compressed-tensors"}}, .select = select_w4a8_int8},
              {.method_class = "", .select = select_w4a8_int8},
          },
      .backends = w4a8_int8_backends(),
      .moe_backend_map = w4a8_int8_moe_backend_map(),
      .layouts = w4a8_int8_layouts(),
  };
  return d;
}

}  // namespace moepack::oracle
