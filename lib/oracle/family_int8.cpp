// Integer-activation families (vllm/model_executor/layers/fused_moe/oracle/int8.py, w4a8.py,
// w4a8_int8.py @ e9d1398d9):
//   INT8 W8A8  (kInt8StaticChannelSym x kInt8DynamicTokenSym): TRITON, HUMMING, CPU [Arm, x86+AMX]
//   W4A8 FP8   (kInt4Static x kFp8DynamicTokenSym): CUTLASS only; --moe-backend is not consulted
//   W4A8 INT8  (4-bit weights, dynamic int8 activations inside the kernel): CPU_INT4 on CPU only
#include "lib/oracle/selection.h"

namespace moepack::oracle {

namespace {

using namespace keys;

const std::vector<BackendRow>& int8_backends() {
  static const std::vector<BackendRow> rows = {
      {"TRITON", "TRITON", {"TritonExperts"}},
      {"HUMMING", "HUMMING", {"BatchedHummingGroupedExperts", "HummingGroupedExperts", "HummingIndexedExperts"}},
      {"CPU", "CPU", {"ArmCPUExpertsInt8", "CPUExpertsInt8"}},
  };
  return rows;
}

const BackendRow kW4A8Cutlass{"CUTLASS", "CUTLASS", {"CutlassExpertsW4A8Fp8"}};
const BackendRow kW4A8Int8Cpu{"CPU_INT4", "CPU_INT4", {"CPUExpertsInt4[cpu_int4_moe]"}};

OptKey key_or(const std::string& name, const QuantKey& fallback) {
  if (name.empty()) return fallback;
  return quant_key_by_name(name);
}

}  // namespace

Selection select_int8_family(SelectionContext& ctx) {
  const OptKey w = key_or(ctx.query.weight_key, kInt8StaticChannelSym);
  const OptKey a = key_or(ctx.query.activation_key, kInt8DynamicTokenSym);
  const ActivationFormat fmt = ctx.activation_format();
  const std::string& runner = ctx.moe.moe_backend;
  if (runner != "auto") {
    std::string requested;
    if (runner == "triton") requested = "TRITON";
    else if (runner == "humming") requested = "HUMMING";
    else raise_value_error("moe_backend='" + runner + "' is not supported for Int8 MoE. Expected one of ['triton', 'humming'].");
    const BackendRow& row = requested == "TRITON" ? int8_backends()[0] : int8_backends()[1];
    std::string reason;
    if (auto cls = try_backend(ctx, row, w, a, fmt, reason)) return {requested, *cls, w, a};
    raise_value_error(unsupported_message("Int8", requested, reason, false));
  }
  for (const auto& row : int8_backends()) {
    std::string reason;
    if (auto cls = try_backend(ctx, row, w, a, fmt, reason)) return {row.name, *cls, w, a};
  }
  raise_not_implemented("No Int8 MoE backend supports the deployment configuration (weight_key=" + ctx.key_text(w) +
                        ", activation_key=" + ctx.key_text(a) +
                        "). Set `VLLM_LOGGING_LEVEL=DEBUG` to see per-backend unsupported reasons.");
}

Selection select_w4a8_family(SelectionContext& ctx) {
  // compressed_tensors_moe_w4a8_fp8.py asserts these before selecting.
  const MoeLayerQuery& q = ctx.query;
  // (Python asserts: AssertionError, the second one without a message.)
  if (!q.symmetric) throw OracleRaise("AssertionError", "Only symmetric quantization is supported for W4A8 MoE");
  if (q.actorder == "group") throw OracleRaise("AssertionError", "");
  if (q.group_size != 128) throw OracleRaise("AssertionError", "Only group size 128 supported for W4A8 MoE");
  if (ctx.moe.moe_backend != "auto") ctx.notes.push_back("the W4A8 (FP8 activation) oracle does not read --moe-backend");
  const OptKey w = kInt4Static;
  const OptKey a = kFp8DynamicTokenSym;
  std::string reason;
  if (auto cls = try_backend(ctx, kW4A8Cutlass, w, a, ctx.activation_format(), reason)) return {"CUTLASS", *cls, w, a};
  raise_not_implemented("W4A8 MoE backend CUTLASS does not support the deployment configuration: " + (reason.empty() ? "None" : reason) + ".");
}

Selection select_w4a8_int8_family(SelectionContext& ctx) {
  const MoeLayerQuery& q = ctx.query;
  const int group = q.group_size > 0 ? q.group_size : -1;
  // CompressedTensorsW4A8Int8MoEMethod validates the group size against both dimensions first.
  if (group != -1 && (ctx.moe.hidden_dim % group != 0 || ctx.moe.intermediate_size_per_partition % group != 0))
    raise_value_error("Group size (" + std::to_string(group) + ") must evenly divide both hidden size (" + std::to_string(ctx.moe.hidden_dim) +
                      ") and intermediate size per partition (" + std::to_string(ctx.moe.intermediate_size_per_partition) + ").");
  const OptKey w = q.weight_key_value ? q.weight_key_value : OptKey{w4a8_int8_weight_key(group)};
  if (!ctx.deployment.device.is_cpu()) raise_not_implemented("W4A8 Int8 MoE is only supported on CPU platforms");
  const ActivationFormat fmt = ctx.activation_format();
  const std::string& runner = ctx.moe.moe_backend;
  std::string reason;
  if (runner != "auto") {
    if (runner != "cpu") raise_value_error("moe_backend='" + runner + "' is not supported for W4A8 Int8 MoE. Expected one of ['cpu'].");
    if (auto cls = try_backend(ctx, kW4A8Int8Cpu, w, std::nullopt, fmt, reason)) return {"CPU_INT4", *cls, w, std::nullopt};
    raise_value_error(unsupported_message("W4A8 Int8", "CPU_INT4", reason, false));
  }
  if (auto cls = try_backend(ctx, kW4A8Int8Cpu, w, std::nullopt, fmt, reason)) return {"CPU_INT4", *cls, w, std::nullopt};
  raise_not_implemented("No W4A8 Int8 MoE backend supports the deployment configuration.");
}

std::vector<BackendListing> int8_backend_listing() {
  std::vector<BackendListing> out;
  for (const auto& b : int8_backends()) {
    BackendListing l;
    l.family = "int8";
    l.backend = b.name;
    for (const auto& c : b.classes) l.classes.push_back(experts_class_display_name(c));
    if (b.name == "TRITON") l.moe_backend_names = {"triton"};
    if (b.name == "HUMMING") l.moe_backend_names = {"humming"};
    out.push_back(std::move(l));
  }
  return out;
}

std::vector<BackendListing> w4a8_backend_listing() {
  return {
      {"w4a8", "CUTLASS", {"CutlassExpertsW4A8Fp8"}, {}, true},
      {"w4a8_int8", "CPU_INT4", {"CPUExpertsInt4"}, {"cpu"}, true},
  };
}

}  // namespace moepack::oracle
