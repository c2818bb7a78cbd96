// See derivation_registry.h. The rows name the family file where each computation is defined
// and explained with its upstream reference; the factories there parse the rest of the id.
#include "lib/convert/derivation_registry.h"

#include <algorithm>
#include <map>

#include "lib/convert/cpu_int4.h"
#include "lib/convert/cpu_int8.h"
#include "lib/convert/fp8_deepgemm.h"
#include "lib/convert/fp8_marlin.h"
#include "lib/convert/fp8_prepare.h"
#include "lib/convert/nvfp4_prepare.h"
#include "lib/convert/w4a8_cutlass.h"
#include "lib/convert/wna16_marlin.h"
#include "lib/core/error.h"
#include "lib/core/layout_ids.h"
#include "packers/registry.h"

namespace moepack::convert {
namespace {

using K = ComputationKind;

// A derivation that ends in a registered packer: the runtime unpacks through that packer.
DerivedLayout through_inner(const std::string& id) {
  const size_t sep = id.find(packers::kPipelineSeparator);
  if (sep == std::string::npos) return {};
  return {DerivedKind::through_inner, id.substr(sep + packers::kPipelineSeparator.size())};
}

// "w13_qweight" -> "w13_".
std::string projection_of(const std::string& role) { return role.substr(0, role.find('_') + 1); }

// The sort indices' row: the gathered weight and the sorted g_idx go back to checkpoint order.
void read_back_act_order(const std::string& role, std::map<std::string, OwnedTensor>& params, const std::string& where) {
  if (role.ends_with("g_idx_sort_indices")) restore_act_order(params, projection_of(role), where);
}

// The FP8 group scales' row: with the channel scales, the per-group table of the 16 INT4 codes'
// values that vLLM's encoded weights stand for (w4a8_cutlass.h).
void read_back_w4a8_values(const std::string& role, std::map<std::string, OwnedTensor>& params, const std::string& where) {
  const std::string proj = projection_of(role);
  auto s8 = params.find(proj + "weight_scale"), chan = params.find(proj + "weight_chan_scale");
  if (s8 == params.end() || chan == params.end()) throw_bad_input(where, proj + "weight_chan_scale", "W4A8 experts need their FP8 group and channel scales");
  s8->second = w4a8_fp8_value_table(s8->second, chan->second, where + " " + proj);
}

// The CPU INT4 weight's row: vLLM's CPU kernel never reads g_idx (_process_weights_cpu keeps it
// only as a parameter), so its groups are always K / G consecutive inputs.
void read_back_cpu_int4_weight(const std::string& role, std::map<std::string, OwnedTensor>& params, const std::string&) {
  const std::string proj = projection_of(role);
  std::erase_if(params, [&](const auto& kv) { return kv.first.starts_with(proj) && kv.first.find("g_idx") != std::string::npos; });
}

std::shared_ptr<const ExpertDerivation> fp8_marlin_scales(const DerivationQuery& q) { return make_fp8_marlin_scales(q.role, q.layout_id); }
std::shared_ptr<const ExpertDerivation> cpu_int8_packed(const DerivationQuery& q) { return make_cpu_int8_packed(q.role, q.layout_id); }
std::shared_ptr<const ExpertDerivation> cpu_int4(const DerivationQuery& q) { return make_cpu_int4_derivation(q.role, q.layout_id, q.available, q.layer); }
std::shared_ptr<const ExpertDerivation> deepgemm_sm100_scales(const DerivationQuery& q) { return make_deepgemm_sm100_scales(q.role, q.layout_id); }
std::shared_ptr<const ExpertDerivation> w4a8_scales(const DerivationQuery& q) { return make_w4a8_cutlass_derivation(q.role, q.layout_id); }
std::shared_ptr<const ExpertDerivation> wna16(const DerivationQuery& q) { return make_wna16_derivation(q.role, q.layout_id, q.available, q.layer); }

constexpr const char* kFp8MarlinFile = "lib/convert/fp8_marlin.cpp";
constexpr const char* kCpuInt4File = "lib/convert/cpu_int4.cpp";
constexpr const char* kWna16File = "lib/convert/wna16_marlin.cpp";
constexpr const char* kW4a8File = "lib/convert/w4a8_cutlass.cpp";
constexpr const char* kFp8File = "lib/convert/fp8_prepare.cpp";
constexpr const char* kDeepGemmFile = "lib/convert/fp8_deepgemm.cpp";
constexpr const char* kNvfp4File = "lib/convert/nvfp4_prepare.cpp";
constexpr const char* kReductionsFile = "lib/convert/reductions.cpp";

namespace id = layout_id;
namespace head = layout_id::head;

const ComputationRow kRows[] = {
    // ---- per-expert derivations ----
    {head::fp8_marlin_scales, K::derivation, kFp8MarlinFile, &fp8_marlin_scales, nullptr, nullptr, &through_inner, nullptr,
     [] { return id::pipeline({id::fp8_marlin_scales("block", "BF16"), id::marlin_moe_permute_scales(false, "BF16")}); }, "ct-fp8-block",
     "w13_weight_scale"},
    {head::cpu_sgl_s8s8_compensation, K::derivation, "lib/convert/cpu_int8.cpp", &cpu_int8_packed, nullptr, nullptr, &through_inner, nullptr,
     [] { return id::pipeline({id::cpu_sgl_s8s8_compensation(), id::cpu_sgl_int8_weight}); }, "ct-w8a8-int8", "w13_weight"},
    {head::cpu_sgl_int4_zero_points, K::derivation, kCpuInt4File, &cpu_int4, nullptr, nullptr, &through_inner, nullptr,
     [] { return id::pipeline({id::cpu_sgl_int4_zero_points("awq_qzeros"), id::cpu_sgl_int4_blocked_zero_points()}); }, "awq-int4", "w13_qzeros"},
    {head::cpu_sgl_int4_compensation, K::derivation, kCpuInt4File, &cpu_int4, nullptr, nullptr, &through_inner, &read_back_cpu_int4_weight,
     [] { return id::pipeline({id::cpu_sgl_int4_compensation("awq_qzeros"), id::cpu_sgl_int4_weight_packed(id::IntPacking::awq, 128)}); }, "awq-int4",
     "w13_qweight"},
    {head::deep_gemm_fp8_block_scales, K::derivation, kDeepGemmFile, &deepgemm_sm100_scales, nullptr, nullptr, &through_inner, nullptr,
     [] { return id::pipeline({id::deep_gemm_fp8_block_scales(), id::deep_gemm_transform_sf("1x128x128")}); }, "deepseek-v3-fp8",
     "w13_weight_scale_inv"},
    {head::w4a8_fp8_group_scales, K::derivation, kW4a8File, &w4a8_scales, nullptr, nullptr, &through_inner, &read_back_w4a8_values,
     [] { return id::pipeline({id::w4a8_fp8_group_scales(), id::cutlass_pack_scale_fp8()}); }, "ct-w4a8-fp8", "w13_weight_scale"},
    {head::w4a8_fp8_channel_scales, K::derivation, kW4a8File, &w4a8_scales, nullptr, nullptr, &through_inner, nullptr,
     [] { return id::pipeline({id::w4a8_fp8_channel_scales(), id::unchanged}); }, "ct-w4a8-fp8", "w13_weight_chan_scale"},
    {head::marlin_act_order_rows, K::derivation, kWna16File, &wna16, nullptr, nullptr, &wna16_derived_layout, nullptr,
     [] { return id::pipeline({id::marlin_act_order_rows(), id::marlin_int_repack(id::IntPacking::gptq, 4)}); }, "gptq-int4-desc-act", "w13_qweight"},
    {head::marlin_sort_g_idx, K::derivation, kWna16File, &wna16, nullptr, nullptr, &wna16_derived_layout, &read_back_act_order,
     [] { return id::marlin_sort_g_idx(true); }, "gptq-int4-desc-act", "w13_g_idx_sort_indices"},
    {head::empty_int32, K::derivation, kWna16File, &wna16, nullptr, nullptr, &wna16_derived_layout, nullptr, &id::empty_int32_per_expert, "gptq-int4",
     "w13_g_idx"},
    // ---- per-layer reductions ----
    {head::max_over_experts, K::reduction, kReductionsFile, nullptr, &find_generic_reduction, nullptr, nullptr, nullptr,
     [] { return id::max_over_experts(true); }, "", ""},
    {head::empty_int32, K::reduction, kReductionsFile, nullptr, &find_generic_reduction, nullptr, nullptr, nullptr, &id::empty_int32, "", ""},
    {head::fp8_w13_max_scale, K::reduction, kFp8File, nullptr, &find_fp8_reduction, nullptr, nullptr, nullptr, &id::fp8_w13_max_scale, "", ""},
    {head::fp8_fi_cutlass_alphas, K::reduction, kFp8File, nullptr, &find_fp8_reduction, nullptr, nullptr, nullptr,
     [] { return id::fp8_fi_cutlass_alphas(1, true); }, "", ""},
    {head::nvfp4_ones, K::reduction, kNvfp4File, nullptr, &find_nvfp4_reduction, nullptr, nullptr, nullptr, &id::nvfp4_ones, "", ""},
    {head::nvfp4_weight_scale_2, K::reduction, kNvfp4File, nullptr, &find_nvfp4_reduction, nullptr, nullptr, nullptr,
     [] { return id::nvfp4_weight_scale_2("w13", "input_global_max_all"); }, "", ""},
    {head::nvfp4_input_scale, K::reduction, kNvfp4File, nullptr, &find_nvfp4_reduction, nullptr, nullptr, nullptr,
     [] { return id::nvfp4_input_scale("w2", "global_max_all"); }, "", ""},
    {head::nvfp4_inverse_input_scale_max, K::reduction, kNvfp4File, nullptr, &find_nvfp4_reduction, nullptr, nullptr, nullptr,
     [] { return id::nvfp4_inverse_input_scale_max("w13"); }, "", ""},
    {head::nvfp4_marlin_global_scale, K::reduction, kNvfp4File, nullptr, &find_nvfp4_reduction, nullptr, nullptr, nullptr,
     [] { return id::nvfp4_marlin_global_scale("w2", "bf16"); }, "", ""},
    {head::trtllm_nvfp4_g1_scale_c, K::reduction, kNvfp4File, nullptr, &find_nvfp4_reduction, nullptr, nullptr, nullptr,
     [] { return id::trtllm_nvfp4_g1_scale_c("global_max_all", true); }, "", ""},
    {head::trtllm_nvfp4_gemm1, K::reduction, kNvfp4File, nullptr, &find_nvfp4_reduction, nullptr, nullptr, nullptr,
     [] { return id::trtllm_nvfp4_gemm1("clamp_limit", "global_max_all"); }, "", ""},
    // ---- value stages ----
    {head::fp8_requant_w13_max_scale, K::value_stage, kFp8File, nullptr, nullptr, &find_fp8_value_stage, nullptr, nullptr, &id::fp8_requant_w13_max_scale,
     "", ""},
    {head::fp8_clamp_block_scales, K::value_stage, kFp8File, nullptr, nullptr, &find_fp8_value_stage, nullptr, nullptr, &id::fp8_clamp_block_scales, "", ""},
    {head::deep_gemm_requant_ue8m0, K::value_stage, kDeepGemmFile, nullptr, nullptr, &find_fp8_deepgemm_stage, nullptr, nullptr,
     [] { return id::deep_gemm_requant_ue8m0("scale"); }, "", ""},
    {head::fp8_marlin_scale_dtype, K::value_stage, kFp8MarlinFile, nullptr, nullptr, &find_fp8_marlin_value_stage, nullptr, nullptr,
     [] { return id::fp8_marlin_scale_dtype("BF16"); }, "", ""},
    {head::w4a8_fp8_weight_values, K::value_stage, kW4a8File, nullptr, nullptr, &find_w4a8_value_stage, nullptr, nullptr,
     [] { return id::w4a8_fp8_weight_values(1); }, "", ""},
    {head::nvfp4_bake_weight_scale_2, K::value_stage, kNvfp4File, nullptr, nullptr, &find_nvfp4_value_stage, nullptr, nullptr,
     [] { return id::nvfp4_bake_weight_scale_2("w13"); }, "", ""},
    {head::nvfp4_marlin_scale_factor, K::value_stage, kNvfp4File, nullptr, nullptr, &find_nvfp4_value_stage, nullptr, nullptr,
     [] { return id::nvfp4_marlin_scale_factor("w13", "bf16"); }, "", ""},
};

}  // namespace

std::span<const ComputationRow> computation_table() { return kRows; }

const ComputationRow* find_computation(ComputationKind kind, std::string_view id) {
  const std::string_view head = layout_id::head_of(id);
  for (const ComputationRow& row : kRows)
    if (row.kind == kind && row.head == head) return &row;
  return nullptr;
}

}  // namespace moepack::convert
