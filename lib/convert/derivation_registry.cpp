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

const ComputationRow kRows[] = {
    // ---- per-expert derivations ----
    {"vllm.fp8_marlin_scales", K::derivation, kFp8MarlinFile, &fp8_marlin_scales, nullptr, nullptr, &through_inner, nullptr,
     "vllm.fp8_marlin_scales(kind=block,params_dtype=BF16,e9d1398d9) | vllm.marlin_moe_permute_scales(perm=single,params_dtype=BF16,is_a_8bit=0,e9d1398d9)",
     "ct-fp8-block", "w13_weight_scale"},
    {"cpu.sgl_s8s8_compensation", K::derivation, "lib/convert/cpu_int8.cpp", &cpu_int8_packed, nullptr, nullptr, &through_inner, nullptr,
     "cpu.sgl_s8s8_compensation(e9d1398d9) | cpu.sgl_convert_weight_packed(int8,vnni4)", "ct-w8a8-int8", "w13_weight"},
    {"cpu.sgl_int4_zero_points", K::derivation, kCpuInt4File, &cpu_int4, nullptr, nullptr, &through_inner, nullptr,
     "cpu.sgl_int4_zero_points(zeros=awq_qzeros,e9d1398d9) | cpu.sgl_int4_blocked_zero_points(i8,e9d1398d9)", "awq-int4", "w13_qzeros"},
    {"cpu.sgl_int4_compensation", K::derivation, kCpuInt4File, &cpu_int4, nullptr, nullptr, &through_inner, &read_back_cpu_int4_weight,
     "cpu.sgl_int4_compensation(zeros=awq_qzeros,e9d1398d9) | cpu.sgl_int4_weight_packed(awq,block_k=128,e9d1398d9)", "awq-int4", "w13_qweight"},
    {"deep_gemm.fp8_block_scales", K::derivation, kDeepGemmFile, &deepgemm_sm100_scales, nullptr, nullptr, &through_inner, nullptr,
     "deep_gemm.fp8_block_scales(requant_ue8m0,broadcast_rows,vllm e9d1398d9) | "
     "deep_gemm.transform_sf_into_required_layout(recipe=1x128x128,sm100,packed_ue8m0,mn_major,8b1392b9)",
     "deepseek-v3-fp8", "w13_weight_scale_inv"},
    {"vllm.w4a8_fp8_group_scales", K::derivation, kW4a8File, &w4a8_scales, nullptr, nullptr, &through_inner, &read_back_w4a8_values,
     "vllm.w4a8_fp8_group_scales(quant_fp8=cuda_kernel,e9d1398d9) | vllm.cutlass_pack_scale_fp8(permute=0,2,1,int4b_t,cutlass v4.4.2,e9d1398d9)",
     "ct-w4a8-fp8", "w13_weight_scale"},
    {"vllm.w4a8_fp8_channel_scales", K::derivation, kW4a8File, &w4a8_scales, nullptr, nullptr, &through_inner, nullptr,
     "vllm.w4a8_fp8_channel_scales(quant_fp8=cuda_kernel,e9d1398d9) | vllm.unchanged", "ct-w4a8-fp8", "w13_weight_chan_scale"},
    {"vllm.marlin_act_order_rows", K::derivation, kWna16File, &wna16, nullptr, nullptr, &wna16_derived_layout, nullptr,
     "vllm.marlin_act_order_rows(perm=sort_indices,e9d1398d9) | vllm.gptq_marlin_repack(num_bits=4,is_a_8bit=0,e9d1398d9)", "gptq-int4-desc-act",
     "w13_qweight"},
    {"vllm.marlin_sort_g_idx", K::derivation, kWna16File, &wna16, nullptr, nullptr, &wna16_derived_layout, &read_back_act_order,
     "vllm.marlin_sort_g_idx(sort_indices,stable,e9d1398d9)", "gptq-int4-desc-act", "w13_g_idx_sort_indices"},
    {"vllm.empty_int32", K::derivation, kWna16File, &wna16, nullptr, nullptr, &wna16_derived_layout, nullptr, "vllm.empty_int32(E,0,e9d1398d9)", "gptq-int4",
     "w13_g_idx"},
    // ---- per-layer reductions ----
    {"vllm.max_over_experts", K::reduction, kReductionsFile, nullptr, &find_generic_reduction, nullptr, nullptr, nullptr, "vllm.max_over_experts(f32,all_experts)", "", ""},
    {"vllm.empty_int32", K::reduction, kReductionsFile, nullptr, &find_generic_reduction, nullptr, nullptr, nullptr, "vllm.empty_int32(0,e9d1398d9)", "", ""},
    {"vllm.fp8_w13_max_scale", K::reduction, kFp8File, nullptr, &find_fp8_reduction, nullptr, nullptr, nullptr, "vllm.fp8_w13_max_scale(e9d1398d9)", "", ""},
    {"vllm.fp8_fi_cutlass_alphas", K::reduction, kFp8File, nullptr, &find_fp8_reduction, nullptr, nullptr, nullptr,
     "vllm.fp8_fi_cutlass_alphas(gemm1,all_experts,e9d1398d9)", "", ""},
    {"vllm.nvfp4_ones", K::reduction, kNvfp4File, nullptr, &find_nvfp4_reduction, nullptr, nullptr, nullptr, "vllm.nvfp4_ones(f32)", "", ""},
    {"vllm.nvfp4_weight_scale_2", K::reduction, kNvfp4File, nullptr, &find_nvfp4_reduction, nullptr, nullptr, nullptr,
     "vllm.nvfp4_weight_scale_2(w13,times=input_global_max_all)", "", ""},
    {"vllm.nvfp4_input_scale", K::reduction, kNvfp4File, nullptr, &find_nvfp4_reduction, nullptr, nullptr, nullptr, "vllm.nvfp4_input_scale(w2,global_max_all)", "", ""},
    {"vllm.nvfp4_inverse_input_scale_max", K::reduction, kNvfp4File, nullptr, &find_nvfp4_reduction, nullptr, nullptr, nullptr,
     "vllm.nvfp4_inverse_input_scale_max(w13)", "", ""},
    {"vllm.nvfp4_marlin_global_scale", K::reduction, kNvfp4File, nullptr, &find_nvfp4_reduction, nullptr, nullptr, nullptr,
     "vllm.nvfp4_marlin_global_scale(w2,params_dtype=bf16)", "", ""},
    {"vllm.trtllm_nvfp4_g1_scale_c", K::reduction, kNvfp4File, nullptr, &find_nvfp4_reduction, nullptr, nullptr, nullptr,
     "vllm.trtllm_nvfp4_g1_scale_c(input=global_max_all,gated=1)", "", ""},
    {"vllm.trtllm_nvfp4_gemm1", K::reduction, kNvfp4File, nullptr, &find_nvfp4_reduction, nullptr, nullptr, nullptr,
     "vllm.trtllm_nvfp4_gemm1(clamp_limit,input=global_max_all)", "", ""},
    // ---- value stages ----
    {"vllm.fp8_requant_w13_max_scale", K::value_stage, kFp8File, nullptr, nullptr, &find_fp8_value_stage, nullptr, nullptr, "vllm.fp8_requant_w13_max_scale(e9d1398d9)", "", ""},
    {"vllm.fp8_clamp_block_scales", K::value_stage, kFp8File, nullptr, nullptr, &find_fp8_value_stage, nullptr, nullptr,
     "vllm.fp8_clamp_block_scales(min=1e-10,e9d1398d9)", "", ""},
    {"deep_gemm.requant_ue8m0", K::value_stage, kDeepGemmFile, nullptr, nullptr, &find_fp8_deepgemm_stage, nullptr, nullptr,
     "deep_gemm.requant_ue8m0(scale,block=128x128,vllm e9d1398d9)", "", ""},
    {"vllm.fp8_marlin_scale_dtype", K::value_stage, kFp8MarlinFile, nullptr, nullptr, &find_fp8_marlin_value_stage, nullptr, nullptr,
     "vllm.fp8_marlin_scale_dtype(params_dtype=BF16,e9d1398d9)", "", ""},
    {"vllm.w4a8_fp8_weight_values", K::value_stage, kW4a8File, nullptr, nullptr, &find_w4a8_value_stage, nullptr, nullptr, "vllm.w4a8_fp8_weight_values(tp=1,e9d1398d9)", "", ""},
    {"vllm.nvfp4_bake_weight_scale_2", K::value_stage, kNvfp4File, nullptr, nullptr, &find_nvfp4_value_stage, nullptr, nullptr, "vllm.nvfp4_bake_weight_scale_2(w13)", "", ""},
    {"vllm.nvfp4_marlin_scale_factor", K::value_stage, kNvfp4File, nullptr, nullptr, &find_nvfp4_value_stage, nullptr, nullptr,
     "vllm.nvfp4_marlin_scale_factor(w13,params_dtype=bf16)", "", ""},
};

}  // namespace

std::span<const ComputationRow> computation_table() { return kRows; }

std::string_view id_head(std::string_view id) { return id.substr(0, std::min(id.find('('), id.size())); }

const ComputationRow* find_computation(ComputationKind kind, std::string_view id) {
  const std::string_view head = id_head(id);
  for (const ComputationRow& row : kRows)
    if (row.kind == kind && row.head == head) return &row;
  return nullptr;
}

}  // namespace moepack::convert
