// Unquantized (BF16/FP16) MoE selection (vllm/model_executor/layers/fused_moe/oracle/unquantized.py
// @ e9d1398d9).
//
// LoRA short-circuits: TrtLlmBf16LoRAExperts when it fits and the per-rank intermediate size is
// a multiple of 128, else TritonExperts, with no further checks. Otherwise:
//   ROCm [AITER, TRITON, BATCHED_TRITON]; XPU [XPU]; CPU [CPU];
//   CUDA [FLASHINFER_TRTLLM, FLASHINFER_CUTLASS, TRITON, BATCHED_TRITON] with both FlashInfer
//   backends moved to the back on Hopper (family 90), FLASHINFER_CUTLASS moved back when dp > 1,
//   and both moved back for SWIGLUOAI.
// --moe-backend humming is ignored here (treated as auto); other names outside this oracle's map
// are refused (the root of vLLM issue #56832).
#include "lib/core/layout_ids.h"
#include "lib/oracle/family.h"

namespace moepack::oracle {

namespace {

// Enum members with the value strings vLLM prints in messages.
std::span<const BackendRow> backends() {
  static const BackendRow rows[] = {
      {.name = "FLASHINFER_TRTLLM", .classes = {"TrtLlmBf16ExpertsMonolithic", "TrtLlmBf16ExpertsModular"}, .value = "FlashInfer TRTLLM"},
      {.name = "FLASHINFER_CUTLASS", .classes = {"FlashInferExperts"}, .value = "FlashInfer CUTLASS"},
      {.name = "AITER", .classes = {"AiterExperts"}, .value = "ROCm AITER"},
      {.name = "TRITON", .classes = {"TritonExperts"}, .batched = "BATCHED_TRITON"},
      {.name = "BATCHED_TRITON", .classes = {"BatchedTritonExperts"}},
      {.name = "CPU", .classes = {"X86CPUUnquantizedExperts", "ArmCPUUnquantizedExperts", "PowerCPUUnquantizedExperts", "CPUUnquantizedExperts"}},
      {.name = "XPU", .classes = {"XPUExperts"}},
  };
  return rows;
}

std::span<const MoeBackendName> moe_backend_map() {
  static const MoeBackendName rows[] = {
      {"triton", {"TRITON"}}, {"batched_triton", {"BATCHED_TRITON"}}, {"flashinfer_trtllm", {"FLASHINFER_TRTLLM"}},
      {"flashinfer_cutlass", {"FLASHINFER_CUTLASS"}}, {"aiter", {"AITER"}},
  };
  return rows;
}

// The LoRA probe, outside the enum walk (it reports the FLASHINFER_TRTLLM member).
const BackendRow& lora_backend() {
  static const BackendRow row{.name = "FLASHINFER_TRTLLM", .classes = {"TrtLlmBf16LoRAExperts"}, .value = "FlashInfer TRTLLM"};
  return row;
}

bool on_rocm(const SelectionContext& c, const Request&) { return c.deployment.device.is_rocm(); }
bool on_xpu(const SelectionContext& c, const Request&) { return c.deployment.device.is_xpu(); }
bool on_cpu(const SelectionContext& c, const Request&) { return c.deployment.device.is_cpu(); }
// FlashInfer's unquantized kernels are slower than Triton on Hopper.
bool hopper_family(const SelectionContext& c, const Request&) { return c.deployment.device.is_device_capability_family(90); }
bool data_parallel(const SelectionContext& c, const Request&) { return c.moe.parallel.dp_size > 1; }
// FlashInfer maps SWIGLUOAI to plain SwiGLU without the clamp.
bool swiglu_oai(const SelectionContext& c, const Request&) { return c.moe.activation == MoEActivation::SWIGLUOAI; }

const Selector& unquantized_selector() {
  using To = PriorityMove::To;
  static const Selector s{
      .backends = backends(),
      .moe_backend_map = moe_backend_map(),
      .map_name = "unquantized",
      .ignores_moe_backend = [](const std::string& runner) { return runner == "humming"; },
      .ignored_note = "--moe-backend humming is quantization-only; the unquantized oracle treats it as auto",
      .priority = {{on_rocm, {"AITER", "TRITON", "BATCHED_TRITON"}},
                   {on_xpu, {"XPU"}},
                   {on_cpu, {"CPU"}},
                   {nullptr, {"FLASHINFER_TRTLLM", "FLASHINFER_CUTLASS", "TRITON", "BATCHED_TRITON"}}},
      .moves = {{hopper_family, "FLASHINFER_TRTLLM", To::back},
                {hopper_family, "FLASHINFER_CUTLASS", To::back},
                {data_parallel, "FLASHINFER_CUTLASS", To::back},
                {swiglu_oai, "FLASHINFER_TRTLLM", To::back},
                {swiglu_oai, "FLASHINFER_CUTLASS", To::back}},
      .env_switches = {{{"VLLM_ROCM_USE_AITER", "VLLM_ROCM_USE_AITER_MOE"}, aiter_moe_forced, "AITER",
                        "VLLM_ROCM_USE_AITER is exported and true: AITER is forced"}},
      .forced_refusal = [](const std::string& v, const std::string& r) { return unsupported_message("Unquantized", v, r, false); },
      .none_fit = [](SelectionContext&, const Request&, const AutoWalk&) -> Selection {
        raise_not_implemented("No Unquantized MoE backend supports the deployment configuration.");
      },
  };
  return s;
}

Selection select_unquantized(SelectionContext& ctx) {
  if (ctx.moe.lora) {
    std::string reason;
    // The LoRA probe always uses the Standard format.
    auto cls = try_backend(ctx, lora_backend(), std::nullopt, std::nullopt, ActivationFormat::Standard, reason);
    if (cls) {
      if (ctx.moe.intermediate_size_per_partition % 128 == 0) return {"FLASHINFER_TRTLLM", *cls, std::nullopt, std::nullopt};
      ctx.candidates.back().ok = false;
      ctx.candidates.back().reason = "the TRT-LLM LoRA kernel needs the per-rank intermediate size to be a multiple of 128";
    }
    ctx.candidates.push_back({"TRITON", "TritonExperts", true, ""});
    ctx.notes.push_back("LoRA: vLLM returns TritonExperts without checking it");
    return {"TRITON", "TritonExperts", std::nullopt, std::nullopt};
  }
  // --moe-backend batched_triton asks for the batched format itself.
  const bool batched = ctx.moe.parallel.use_batched_activation_format() || ctx.moe.moe_backend == "batched_triton";
  return select_backend(unquantized_selector(), ctx,
                        {std::nullopt, std::nullopt, batched ? ActivationFormat::BatchedExperts : ActivationFormat::Standard, {}});
}

// The CPU experts' intermediate alignment (cpu_moe.py `_intermediate_alignment`: lcm of the
// output and reduction alignments of the class), 0 for classes of other backends.
int cpu_intermediate_alignment(const std::string& experts_class) {
  if (experts_class == "X86CPUUnquantizedExperts" || experts_class == "ArmCPUUnquantizedExperts" || experts_class == "CPUUnquantizedExperts") return 32;
  if (experts_class == "PowerCPUUnquantizedExperts") return 16;
  return 0;
}

// The conversion padding of sizes_layouts.h, step 2: FlashInfer TRT-LLM pads a non-gated
// intermediate to 128 (align_moe_weights_for_fi); the CPU experts pad it to their alignment
// (`_pad_moe_intermediate`), except for SWIGLUOAI, whose size they keep.
std::pair<int, int> conversion_padding(const SelectionContext& ctx, const Selection& s, int hidden, int inter) {
  if (s.backend == "FLASHINFER_TRTLLM" && !is_gated(ctx.moe.activation)) return {hidden, round_up_to(inter, 128)};
  if (s.backend == "CPU" && ctx.moe.activation != MoEActivation::SWIGLUOAI)
    if (const int align = cpu_intermediate_alignment(s.experts_class)) return {hidden, round_up_to(inter, align)};
  return {hidden, inter};
}

bool gated(const SelectionContext& c, const Selection&) { return is_gated(c.moe.activation); }
bool amx_cpu(const SelectionContext&, const Selection& s) { return s.experts_class == "X86CPUUnquantizedExperts"; }
bool vec_cpu(const SelectionContext&, const Selection& s) { return s.experts_class == "CPUUnquantizedExperts"; }
bool arm_cpu(const SelectionContext&, const Selection& s) { return s.experts_class == "ArmCPUUnquantizedExperts"; }
bool power_cpu(const SelectionContext&, const Selection& s) { return s.experts_class == "PowerCPUUnquantizedExperts"; }

// w13 and w2 in the given layouts, biases as loaded.
std::vector<std::pair<std::string, std::string>> biases_as_loaded(const std::string& w13, const std::string& w2) {
  const std::string unchanged(layout_id::unchanged);
  return {{"w13_weight", w13}, {"w2_weight", w2}, {"w13_bias", unchanged}, {"w2_bias", unchanged}};
}

// Layout ids are packers/registry.cpp rows; an id that is not registered makes convert refuse
// the deployment by name. Every CPU class packs w13 and w2 with cpu_prepack_moe_weight and its
// own isa (packers/cpu_prepack_moe.h). Biases are never
// transformed by this family: every backend reads layer.w13_bias / w2_bias as loaded (the CPU
// loader pads w13_bias like w13); FLASHINFER_TRTLLM lists none, so a biased layer there is refused.
std::span<const LayoutRow> layouts() {
  using layout_id::fi_trtllm_bf16_block_major_k;
  namespace rows_of = layout_id::rows;
  const std::string unchanged(layout_id::unchanged);
  static const LayoutRow rows[] = {
      {.backend = "FLASHINFER_TRTLLM", .condition_text = "gated", .condition = gated,
       .roles = {{"w13_weight", fi_trtllm_bf16_block_major_k(rows_of::w3w1_interleave)},
                 {"w2_weight", fi_trtllm_bf16_block_major_k(rows_of::identity)}}},
      {.backend = "FLASHINFER_TRTLLM", .condition_text = "not gated (intermediate padded to 128)",
       .roles = {{"w13_weight", fi_trtllm_bf16_block_major_k(rows_of::identity)},
                 {"w2_weight", fi_trtllm_bf16_block_major_k(rows_of::identity)}}},
      {.backend = "FLASHINFER_CUTLASS", .condition_text = "gated", .condition = gated,
       .roles = biases_as_loaded(layout_id::swap_w13_to_w31(), unchanged)},
      {.backend = "FLASHINFER_CUTLASS", .condition_text = "not gated", .roles = biases_as_loaded(unchanged, unchanged)},
      // rocm_aiter_ops.shuffle_weights: AITER's shuffle_weight (16, 16) on the 16-bit weights,
      // 8-element runs in 16-row tiles (packers/aiter_shuffle_weight.h).
      {.backend = "AITER", .roles = biases_as_loaded(layout_id::aiter_shuffle_weight(), layout_id::aiter_shuffle_weight())},
      {.backend = "CPU", .condition_text = "X86CPUUnquantizedExperts (AMX)", .condition = amx_cpu,
       .roles = biases_as_loaded(layout_id::cpu_prepack_moe_weight("amx"), layout_id::cpu_prepack_moe_weight("amx"))},
      {.backend = "CPU", .condition_text = "CPUUnquantizedExperts (vec)", .condition = vec_cpu,
       .roles = biases_as_loaded(layout_id::cpu_prepack_moe_weight("vec"), layout_id::cpu_prepack_moe_weight("vec"))},
      {.backend = "CPU", .condition_text = "ArmCPUUnquantizedExperts (neon)", .condition = arm_cpu,
       .roles = biases_as_loaded(layout_id::cpu_prepack_moe_weight("neon"), layout_id::cpu_prepack_moe_weight("neon"))},
      {.backend = "CPU", .condition_text = "PowerCPUUnquantizedExperts (vsx)", .condition = power_cpu,
       .roles = biases_as_loaded(layout_id::cpu_prepack_moe_weight("vsx"), layout_id::cpu_prepack_moe_weight("vsx"))},
      {.backend = "XPU", .roles = biases_as_loaded(layout_id::xpu_transpose(), layout_id::xpu_transpose())},
      {.backend = "*", .condition_text = "TRITON, BATCHED_TRITON", .roles = biases_as_loaded(unchanged, unchanged)},
  };
  return rows;
}

}  // namespace

const FamilyDescriptor& unquantized_family() {
  static const FamilyDescriptor d{
      .family = Family::unquantized,
      .name = "unquantized",
      .methods =
          {
              {.method_class = "UnquantizedFusedMoEMethod", .reached_by = {{"*"}}, .select = select_unquantized},
              {.method_class = "", .select = select_unquantized},
          },
      .backends = backends(),
      .moe_backend_map = moe_backend_map(),
      .extra_listings = {{"unquantized", "FLASHINFER_TRTLLM (LoRA)", {"TrtLlmBf16LoRAExperts"}, {}, true}},
      .conversion_padding = conversion_padding,
      .layouts = layouts(),
  };
  return d;
}

}  // namespace moepack::oracle
