#include "lib/convert/plan.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "lib/convert/cpu_int4.h"
#include "lib/convert/derivations.h"
#include "lib/convert/loader_facts.h"
#include "lib/convert/param_loader.h"
#include "lib/convert/w4a8_cutlass.h"
#include "lib/convert/wna16_marlin.h"
#include "lib/core/error.h"
#include "packers/registry.h"

namespace moepack::convert {
namespace fs = std::filesystem;
namespace orc = oracle;

orc::MoeLayerQuery query_from_checkpoint(const ckpt::Checkpoint& c, const ckpt::MoeLayer& layer, const orc::Deployment& dep) {
  // A lone file is described by inspect, but the scheme and the expert sizes are in config.json.
  if (!c.has_config)
    throw_bad_input((fs::path(c.shards->root()) / "config.json").string(), "",
                    "config.json is missing: it is needed to detect the quantization scheme and check the expert shapes of " + std::to_string(c.layers.size()) +
                        " MoE layer(s) (inspect describes the file without it)");
  const ckpt::LayerQuant& lq = layer.quant;
  // compressed-tensors W4A8: vLLM picks another method on exactly SM90.
  const ckpt::MethodChoice& m = (lq.on_sm90 && dep.device.is_device_capability(90)) ? *lq.on_sm90 : lq.method;
  orc::MoeLayerQuery q;
  q.prefix = layer.prefix;
  // The family comes from the keys the reader saw; its own family name is for `inspect` only.
  auto f = orc::family_from_keys(m.weight_key, m.activation_key);
  if (!f) throw_bad_input(c.path, layer.prefix, "the checkpoint reader reported a weight key no oracle family takes: '" + m.weight_key + "'");
  q.family = *f;
  // The method class is the oracle's to resolve (from the family's method rows); the reader's
  // moe_method is only what `inspect` displays.
  q.quant_method = m.quant_method;
  q.weight_key = m.weight_key;
  q.activation_key = m.activation_key;
  q.weight_bits = lq.weight_bits;
  q.group_size = lq.group_size > 0 ? static_cast<int>(lq.group_size) : -1;
  q.symmetric = lq.symmetric;
  q.has_zero_points = lq.may_have_zp;
  q.desc_act = lq.act_order && c.family == ckpt::Family::gptq;
  q.actorder = lq.actorder;
  if (q.family == orc::Family::wna16) {
    q.may_have_zp = lq.may_have_zp;
    q.may_have_bias = lq.may_have_bias;
    q.allow_tile_padding = lq.allow_tile_padding;
  }
  q.static_input_scales = lq.input_scales == "static";
  if (m.quant_method == "quark" && q.family == orc::Family::mxfp4) {
    // The reader reports the OCP_MX_Scheme as the config spells it; the method passes its own
    // activation key for every scheme with activation quantization.
    q.quark_ocp_mx_scheme = lq.quark_ocp_mx_scheme;
    if (q.quark_ocp_mx_scheme != "w_mxfp4") q.activation_key.clear();
  }
  const ckpt::ModelFacts& facts = c.facts;
  q.model_type = facts.model_type;
  q.architecture = facts.architecture;
  q.hidden_size = static_cast<int>(layer.hidden_size);
  q.moe_intermediate_size = static_cast<int>(layer.intermediate_size);
  q.num_experts = static_cast<int>(layer.num_experts);
  q.top_k = static_cast<int>(facts.top_k);
  if (!facts.activation.empty()) q.activation = facts.activation;
  if (auto r = orc::parse_routing_method(facts.routing_method)) q.routing = *r;
  q.has_bias = layer.has_bias;
  q.swiglu_limit = facts.swiglu_limit;
  return q;
}

std::vector<LayerDecision> decide_layers(const ckpt::Checkpoint& checkpoint, const orc::Deployment& deployment) {
  std::vector<LayerDecision> out;
  for (const auto& layer : checkpoint.layers) {
    LayerDecision d;
    d.layer = &layer;
    d.query = query_from_checkpoint(checkpoint, layer, deployment);
    d.decision = orc::decide(d.query, deployment);
    d.model_dtype = deployment.model_dtype;
    d.platform = deployment.device.platform;
    d.fp8_is_fnuz = deployment.device.fp8_is_fnuz();
    out.push_back(std::move(d));
  }
  return out;
}

std::optional<orc::DecisionError> load_refusal(const ckpt::MoeLayer& layer) {
  if (layer.quant.unsupported.empty()) return std::nullopt;
  return orc::DecisionError{layer.quant.unsupported_error, layer.quant.unsupported};
}

std::optional<orc::DecisionError> load_time_refusal(const LayerDecision& ld) {
  const orc::Decision& d = ld.decision;
  if (!d.ok()) return std::nullopt;
  // The oracle's NONE (no kernel on this platform, left to out-of-tree plugins): vLLM's own
  // conversion raises on it (convert_to_fp8_moe_kernel_format: "Unsupported FP8 MoE backend: NONE").
  if (!d.backend || !d.experts_class) {
    std::string family = orc::family_name(d.family);
    std::transform(family.begin(), family.end(), family.begin(), [](unsigned char ch) { return static_cast<char>(std::toupper(ch)); });
    return orc::DecisionError{"ValueError", "Unsupported " + family + " MoE backend: " + d.backend.value_or("NONE") +
                                                " (no experts class runs this layer on the target)"};
  }
  // compressed-tensors MXFP4 picks MarlinExperts on every device without CUTLASS MXFP4 or XPU
  // (CompressedTensorsW4A4Mxfp4MoEMethod.__init__), but vLLM builds its Marlin ops for CUDA only
  // (CMakeLists.txt @ e9d1398d9): on ROCm or a CPU the layer fails while it is prepared.
  if (d.backend == "MARLIN" && ld.platform != orc::Platform::cuda)
    return orc::DecisionError{"AttributeError", std::string("torch.ops._C has no Marlin ops on a ") +
                                                    (ld.platform == orc::Platform::rocm ? "ROCm" : ld.platform == orc::Platform::cpu ? "CPU" : "non-CUDA") +
                                                    " target (vLLM builds them for CUDA only), so MarlinExperts fails while vLLM prepares the layer"};
  return std::nullopt;
}

VllmLoadError::VllmLoadError(const std::string& prefix, std::string message)
    : Error(ErrorKind::refused, "layer " + prefix + ": " + message), message_(std::move(message)) {}

std::vector<orc::Decision> reported_decisions(const ckpt::Checkpoint& checkpoint, const std::vector<LayerDecision>& layers) {
  std::vector<orc::Decision> out;
  for (const LayerDecision& ld : layers) {
    orc::Decision d = reported_decision(ld);
    if (d.ok()) {
      // What building the layer's conversion plan finds vLLM would fail on while it loads the
      // layer at these sizes (headers only; moepack's own refusals leave the answer as it is).
      try {
        build_conversion_plan(checkpoint, {ld}, ConvertRequest{});
      } catch (const VllmLoadError& e) {
        d.error = orc::DecisionError{"LoadFailure", e.message()};
        d.backend.reset();
        d.experts_class.reset();
        d.tensor_layouts.clear();
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::refused) throw;
      }
    }
    out.push_back(std::move(d));
  }
  return out;
}

orc::Decision reported_decision(const LayerDecision& layer) {
  orc::Decision d = layer.decision;
  // Where the oracle already refuses the layer, its error is the one reported; then the errors
  // vLLM raises while it builds and loads the layer with the chosen backend.
  std::optional<orc::DecisionError> refusal = load_refusal(*layer.layer);
  if (!refusal) refusal = load_time_refusal(layer);
  if (refusal && d.ok()) {
    d.error = std::move(refusal);
    d.backend.reset();
    d.experts_class.reset();
    d.tensor_layouts.clear();
  }
  return d;
}

namespace {

[[noreturn]] void refuse(const std::string& prefix, const std::string& why) {
  throw Error(ErrorKind::refused, "layer " + prefix + ": " + why);
}

// Every file of the source directory that is neither a shard read nor the index (those are
// rewritten), relative to the root, sorted.
std::vector<std::string> files_to_copy(const ckpt::Checkpoint& c) {
  std::vector<std::string> out;
  if (!c.shards->is_directory()) return out;
  const fs::path root = c.shards->root();
  std::set<std::string> shards;
  for (const auto& f : c.shards->files()) shards.insert(fs::weakly_canonical(f->path()).string());
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    if (!it->is_regular_file()) continue;
    // Lexically: fs::relative would follow a Hugging Face snapshot's symlinks and name the blob.
    std::string rel = it->path().lexically_relative(root).string();
    if (rel == "model.safetensors.index.json") continue;
    if (shards.count(fs::weakly_canonical(it->path()).string())) continue;
    out.push_back(rel);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A role is packed expert by expert (layout) or reduced over the rank's experts (reduction).
// `source_role` is the loaded param it reads (compressed-tensors NVFP4 names differ from the
// names vLLM gives the parameters after loading); `stage` changes its values before the layout.
struct RoleSpec {
  std::string role;
  std::string source_role;
  std::shared_ptr<const packers::Layout> layout;
  const LayerReduction* reduction = nullptr;
  const ValueStage* stage = nullptr;
  std::shared_ptr<const ExpertDerivation> derivation;  // per-expert output of several params (wna16_marlin.h)
};


// A family row's layout for a param vLLM drops (sets to None) after loading.
constexpr std::string_view kDroppedLayout = "dropped";

// One output tensor computed from all of the rank's experts: planned as a single "slab".
PackedTensorPlan reduction_tensor(const ckpt::Checkpoint& checkpoint, const ckpt::MoeLayer& layer, const std::string& role,
                                  const LayerReduction& reduction, const RankGeometry& g, uint64_t first_expert, uint64_t local_experts,
                                  const SwigluFacts& swiglu) {
  PackedTensorPlan t;
  t.role = role;
  t.name = layer.prefix + "." + role;
  t.dtype = reduction.dtype();
  t.shape = reduction.shape(local_experts);
  t.layout = reduction.name();
  t.num_experts = 1;
  t.slab_bytes = byte_size(t.dtype, t.shape);
  t.canonical_dtype = t.dtype;
  t.canonical_shape = t.shape;
  t.per_expert = false;
  t.derived = reduction.name() + " over the rank's " + std::to_string(local_experts) + " experts";
  const LayerReduction* r = &reduction;
  const ReductionInput input = reduction_input(checkpoint, layer, role, g, first_expert, local_experts, swiglu);
  t.produce = [r, input](uint64_t, std::span<uint8_t> out) { r->reduce(input, out); };
  return t;
}

}  // namespace

namespace {

// The router's score-correction bias of a layer: a pass-through tensor beside the experts
// (`<block>.gate.e_score_correction_bias`, DeepSeek-V4's `<block>.gate.bias`).
std::optional<std::string> correction_bias_name(const ckpt::Checkpoint& c, const ckpt::MoeLayer& layer) {
  if (!c.facts.has_e_score_correction_bias) return std::nullopt;
  const std::string block = layer.prefix.substr(0, layer.prefix.rfind('.'));
  for (const char* suffix : {".gate.e_score_correction_bias", ".gate.bias"})
    if (c.shards->find(block + suffix)) return block + suffix;
  return std::nullopt;
}

// DeepSeek-V4's hash layers (decoder index below num_hash_layers) route through the gate's
// tid2eid table, a pass-through tensor beside the experts; vLLM allocates it for those layers
// only, so a hash layer without it cannot run as the checkpoint intends: bad input.
std::optional<std::string> hash_table_name(const ckpt::Checkpoint& c, const ckpt::MoeLayer& layer) {
  if (c.facts.model_type != "deepseek_v4" || layer.layer_index < 0 || static_cast<uint64_t>(layer.layer_index) >= c.facts.num_hash_layers) return std::nullopt;
  const std::string name = layer.prefix.substr(0, layer.prefix.rfind('.')) + ".gate.tid2eid";
  const std::optional<st::TensorRef> ref = c.shards->find(name);
  if (!ref)
    throw Error(ErrorKind::bad_input, c.path + ": " + name + ": missing: layer " + std::to_string(layer.layer_index) + " is below num_hash_layers (" +
                                          std::to_string(c.facts.num_hash_layers) + ") and routes by token id through this table");
  const st::TensorInfo* t = ref->info;
  if ((t->dtype != DType::I32 && t->dtype != DType::I64) || t->shape.size() != 2 || t->shape[1] != c.facts.top_k || t->shape[0] == 0)
    throw Error(ErrorKind::bad_input, c.path + ": " + name + ": must be I32 or I64 [vocab, " + std::to_string(c.facts.top_k) + "] (expert ids per token)");
  return name;
}

}  // namespace

void record_run_facts(const ckpt::Checkpoint& c, const ckpt::MoeLayer& layer, const orc::MoeLayerQuery& query, artifact::Layer& m) {
  const ckpt::ModelFacts& f = c.facts;
  artifact::RoutingFacts r;
  r.method = f.routing_method;
  r.scoring_func = f.scoring_func;
  r.renormalize = f.renormalize;
  r.n_group = f.n_group;
  r.topk_group = f.topk_group;
  r.routed_scaling_factor = f.routed_scaling_factor;
  r.correction_bias = correction_bias_name(c, layer);
  r.hash_table = hash_table_name(c, layer);
  // vLLM's hash layers have no score correction (the gate gets no e_score_correction_bias).
  if (r.hash_table) r.correction_bias.reset();
  m.routing = r;
  m.swiglu_limit = query.swiglu_limit;
  m.swiglu_alpha = query.swiglu_alpha;
  m.swiglu_beta = query.swiglu_beta;
  m.has_bias = layer.has_bias;
  m.w13_rows = layer.recipe.w13_order == ckpt::W13Order::interleaved ? "interleaved" : "gate_up_halves";
  m.gated = layer.gated;
}



namespace {

// What the plan knows before any layer: the source, the target, the files copied unchanged.
ConversionPlan plan_sources(const ckpt::Checkpoint& checkpoint, const ConvertRequest& request) {
  ConversionPlan plan;
  plan.source_root = checkpoint.shards->root();
  plan.source_scheme = checkpoint.scheme_id;
  plan.source_scheme_description = checkpoint.scheme;
  plan.target = request.target_json;
  for (const auto& f : checkpoint.shards->files()) {
    plan.source_files.push_back(f->path());
    plan.source_mappings.push_back(f.get());
  }
  plan.copied_files = files_to_copy(checkpoint);
  return plan;
}

// The refusals that need only the decision: vLLM would not load or run the layer, or moepack
// cannot produce its family's layouts.
void refuse_unconvertible(const LayerDecision& ld) {
  const ckpt::MoeLayer& layer = *ld.layer;
  const orc::MoeLayerQuery& query = ld.query;
  const orc::Decision& d = ld.decision;
  if (auto refusal = load_refusal(layer)) refuse(layer.prefix, "vLLM refuses to load this layer: " + refusal->message);
  if (d.error) refuse(layer.prefix, d.error->type + ": " + d.error->message);
  if (d.method_class.ends_with("OnlineMoEMethod"))
    refuse(layer.prefix, d.method_class + " quantizes the 16-bit experts while vLLM loads them; moepack prepacks checkpoints "
                         "that are already quantized and does not quantize (drop --quantization to prepack the 16-bit experts)");
  // What vLLM raises while it builds and loads the layer (`plan` reports the same).
  if (auto raised = load_time_refusal(ld)) refuse(layer.prefix, "backend " + d.backend.value_or("NONE") + ": " + raised->type + ": " + raised->message);
  // vLLM's CPU experts (experts/cpu_moe.py, cpu_int4_moe.py @ e9d1398d9) are monolithic and
  // ignore the expert_map they are handed (supports_expert_map() is False or absent, and nothing
  // calls it): under expert parallelism each rank would index its local experts with global ids.
  if (d.ep_size > 1 && d.experts_class && d.experts_class->find("CPU") != std::string::npos)
    refuse(layer.prefix, "backend " + d.backend.value_or("?") + " / " + *d.experts_class + " with expert parallelism (" + std::to_string(d.ep_size) +
                             " ranks): vLLM's CPU experts ignore expert_map and would index each rank's " + std::to_string(d.num_local_experts) +
                             " experts with global expert ids; refusing rather than writing artifacts vLLM runs wrongly");
  if (d.family == orc::Family::wna16 && d.backend == "CPU")
    if (auto why = cpu_int4_refusal(layer, d)) refuse(layer.prefix, "backend CPU / " + d.experts_class.value_or("?") + ": " + *why);
  if (d.family == orc::Family::nvfp4 && d.backend == "FLASHINFER_TRTLLM") {
    // align_fp4_moe_weights_for_fi pads w13 = [w3; w1] at the end of all its rows, then the
    // gated-activation interleave splits the padded rows in two equal halves: rows of w3 and
    // w1 end up paired wrongly. vLLM loads the layer and computes garbage; moepack refuses.
    if (layer.gated && d.padded_intermediate_size != d.intermediate_size)
      refuse(layer.prefix, "backend FLASHINFER_TRTLLM: vLLM pads the gated w13 from " + std::to_string(2 * d.intermediate_size) + " to " +
                               std::to_string(2 * d.padded_intermediate_size) +
                               " rows at the end of [w3; w1] (align_fp4_moe_weights_for_fi), so its gate/up row interleave pairs rows of "
                               "different halves and the layer computes wrong results; refusing rather than writing those bytes "
                               "(an intermediate size per rank that is a multiple of 64 avoids it)");
    if (query.activation == "situ")
      refuse(layer.prefix, "backend FLASHINFER_TRTLLM with SiTU: TrtLlmNvFp4Experts keeps per-expert SiTU tensors this build does not write");
  }
}

// UnquantizedFusedMoEMethod creates the expert parameters in the model dtype and the loader
// casts the checkpoint's values into them; moepack moves values, it does not round them.
void refuse_unquantized_cast(const LayerDecision& ld) {
  if (ld.decision.family != orc::Family::unquantized) return;
  const DType want = ld.model_dtype == orc::FloatType::bfloat16 ? DType::BF16 : ld.model_dtype == orc::FloatType::float16 ? DType::F16 : DType::F32;
  for (const auto& p : ld.layer->params)
    if (p.dtype != want)
      refuse(ld.layer->prefix, "backend " + ld.decision.backend.value_or("?") + ": the checkpoint's " + p.name + " is " + std::string(dtype_name(p.dtype)) +
                                   " and --dtype " + orc::float_type_short_name(ld.model_dtype) +
                                   " makes vLLM cast it while loading; moepack does not cast expert weights (pass --dtype matching the checkpoint)");
}

// Which canonical params this layer has (one expert's summary) and how each becomes its output:
// a packer layout or a reduction over the rank's experts.
std::vector<RoleSpec> role_specs(const ckpt::MoeLayer& layer, const orc::Decision& d) {
  std::set<std::string> available;
  for (const auto& p : layer.params) available.insert(p.name);
  std::set<std::string> consumed;  // loaded params some output reads or vLLM drops
  std::vector<RoleSpec> roles;
  for (const auto& [role, layout_id] : d.tensor_layouts) {
    if (auto derivation = make_expert_derivation(role, layout_id, available, layer)) {
      // The derivation replaces the param of its own name (vLLM's empty [E, 0] g_idx) and reads its inputs.
      if (available.count(role)) consumed.insert(role);
      for (const std::string& input : derivation->inputs()) consumed.insert(input);
      RoleSpec spec{role, "", nullptr, nullptr, nullptr, std::move(derivation)};
      roles.push_back(std::move(spec));
      continue;
    }
    const std::string source = loaded_param_name(available, role);
    if (!source.empty()) consumed.insert(source);
    if (layout_id == kDroppedLayout) continue;
    RoleSpec spec{role, source, nullptr, nullptr, nullptr, nullptr};
    std::string_view packer_id = layout_id;
    if (const size_t sep = layout_id.find(kValueStageSeparator); sep != std::string::npos) {
      spec.stage = find_value_stage(std::string_view(layout_id).substr(0, sep));
      if (!spec.stage) throw_internal("unknown value stage in layout `" + layout_id + "`");
      packer_id.remove_prefix(sep + kValueStageSeparator.size());
    }
    if (const LayerReduction* reduction = find_reduction(packer_id)) {
      if (source.empty() && !reduction->reads_other_roles()) continue;  // e.g. input scales of a model without them
      spec.reduction = reduction;
      roles.push_back(std::move(spec));
      continue;
    }
    if (source.empty()) continue;  // e.g. biases of a model without them
    if (!packers::find_layout(packer_id.substr(0, packer_id.find(packers::kPipelineSeparator))))
      refuse(layer.prefix, "backend " + d.backend.value_or("?") + " / " + d.experts_class.value_or("?") + ": the layout `" + std::string(packer_id) + "` of " + role +
                               " is not implemented byte-exactly in this build; refusing rather than writing an approximation");
    spec.layout = std::shared_ptr<const packers::Layout>(packers::make_layout(packer_id));
    roles.push_back(std::move(spec));
  }
  // A loaded parameter the backend's layout table does not name would be dropped silently
  // (its source tensors are not passed through either): refuse instead.
  for (const auto& p : layer.params)
    if (!consumed.count(p.name))
      refuse(layer.prefix, "backend " + d.backend.value_or("?") + ": no layout is known for the loaded parameter " + p.name +
                               " on this backend; refusing rather than dropping it");
  return roles;
}

// The layer's manifest entry, all but its ranks.
artifact::Layer manifest_layer(const ckpt::Checkpoint& checkpoint, const LayerDecision& ld) {
  const ckpt::MoeLayer& layer = *ld.layer;
  const orc::Decision& d = ld.decision;
  artifact::Layer m;
  m.prefix = layer.prefix;
  m.family = orc::family_name(d.family);
  m.weight_key = d.weight_key;
  m.activation_key = d.activation_key;
  m.backend = *d.backend;
  m.experts_class = *d.experts_class;
  m.num_experts = layer.num_experts;
  m.top_k = checkpoint.facts.top_k;
  m.activation = ld.query.activation;
  m.hidden_size = static_cast<uint64_t>(d.hidden_size);
  m.intermediate_size = static_cast<uint64_t>(d.intermediate_size);
  m.padded_hidden_size = static_cast<uint64_t>(d.padded_hidden_size);
  m.padded_intermediate_size = static_cast<uint64_t>(d.padded_intermediate_size);
  record_run_facts(checkpoint, layer, ld.query, m);
  return m;
}

// How a layer's experts spread over ranks: expert parallelism gives each rank whole experts;
// tensor parallelism slices every expert.
struct RankSplit {
  bool expert_parallel = false;
  int ranks = 1;
  uint64_t local_experts = 0;
};

RankSplit split_over_ranks(const ckpt::MoeLayer& layer, const orc::Decision& d) {
  RankSplit split;
  split.expert_parallel = d.ep_size > 1;
  split.ranks = split.expert_parallel ? d.ep_size : d.tp_size;
  split.local_experts = split.expert_parallel ? layer.num_experts / static_cast<uint64_t>(d.ep_size) : layer.num_experts;
  return split;
}

// The elements one w2 scale covers along the intermediate dim, for the block-scaled float
// families vLLM shards by whole scale groups; 0 where the rule does not apply (no such scales,
// gpt-oss' block loader, or a family whose loader refuses split groups itself: WNA16, FP8 blocks).
uint64_t w2_scale_group(const ckpt::MoeLayer& layer, const orc::Decision& d) {
  if (d.family == orc::Family::nvfp4) return layer.quant.group_size > 0 ? static_cast<uint64_t>(layer.quant.group_size) : 16;
  if (d.family == orc::Family::mxfp8) return 32;
  if (d.family == orc::Family::mxfp4 && !uses_gpt_oss_mx_block_loader(layer, orc::family_name(d.family))) return 32;
  return 0;
}

// The refusals of a split that vLLM would load wrongly or not at all.
void refuse_bad_split(const ckpt::MoeLayer& layer, const orc::Decision& d, const RankSplit& split) {
  if (split.expert_parallel && layer.num_experts % static_cast<uint64_t>(d.ep_size) != 0)
    refuse(layer.prefix, std::to_string(layer.num_experts) + " experts do not split evenly over " + std::to_string(d.ep_size) + " expert-parallel ranks");
  // MX formats scale blocks of 32 elements along the input dim: a per-rank size that splits a
  // block leaves vLLM a parameter with a fractional number of scale groups (truncated to what
  // fits, so the kernel reads the wrong scales). Refused rather than packed.
  if (d.family == orc::Family::mxfp4 && (d.padded_intermediate_size % 32 != 0 || d.padded_hidden_size % 32 != 0))
    refuse(layer.prefix, "backend " + d.backend.value_or("?") + ": the per-rank sizes (hidden " + std::to_string(d.padded_hidden_size) +
                             ", intermediate " + std::to_string(d.padded_intermediate_size) +
                             ") split the 32-element MX scale blocks at this parallel size");
  // Scale groups along w2's input dim (NVFP4 16, MXFP4 / MXFP6 / MXFP8 32): the methods'
  // create_weights allocate w2's scales for intermediate_size_per_partition // group groups, and
  // FusedMoE._load_w2 narrows the checkpoint's I / group groups by whole groups per rank
  // (modelopt.py, compressed_tensors_moe_w4a4_nvfp4.py, quark_moe.py, routed_experts.py
  // @ e9d1398d9; padding comes later). A per-rank size that is not a multiple of the group leaves
  // the rank's w2 weights without their own scales (none at all below one group, at TP 8 and 16
  // on the samples): vLLM loads the layer and computes wrong results (EMULATION reads past an
  // empty scale tensor). Refused. gpt-oss' MXFP4 loader takes whole blocks per rank instead.
  if (const uint64_t group = w2_scale_group(layer, d); group > 0 && static_cast<uint64_t>(d.intermediate_size) % group != 0) {
    const auto per_rank = static_cast<uint64_t>(d.intermediate_size);
    refuse(layer.prefix, "backend " + d.backend.value_or("?") + ": the per-rank intermediate size " + std::to_string(per_rank) + " is not a multiple of the " +
                             std::to_string(group) + "-element " + orc::family_name(d.family) + " scale group: vLLM allocates and loads w2's scales for " +
                             std::to_string(per_rank) + " // " + std::to_string(group) + " = " + std::to_string(per_rank / group) +
                             " group(s) per row (create_weights, FusedMoE._load_w2), so the rank's w2 weights run without their own scales; refusing "
                             "rather than writing a layer vLLM computes wrongly");
  }
  // gpt-oss' loaders other than the MXFP4 ones (GptOssModel._load_weights_other, the non-MXFP4
  // branch of _load_weights_quark) copy a rank's slice into the whole parameter (param.copy_),
  // which raises unless the slice has the parameter's shape: no padding of either size.
  if (layer.recipe.w13_order == ckpt::W13Order::interleaved && !uses_gpt_oss_mx_block_loader(layer, orc::family_name(d.family))) {
    const uint64_t local_intermediate = split.expert_parallel ? layer.intermediate_size : (layer.intermediate_size + static_cast<uint64_t>(d.tp_size) - 1) / static_cast<uint64_t>(d.tp_size);
    if (static_cast<uint64_t>(d.padded_intermediate_size) != local_intermediate || static_cast<uint64_t>(d.padded_hidden_size) != layer.hidden_size)
      throw VllmLoadError(layer.prefix, "backend " + d.backend.value_or("?") + ": vLLM raises RuntimeError while loading: gpt-oss' loader copies each rank's [" +
                               std::to_string(2 * local_intermediate) + ", " + std::to_string(layer.hidden_size) + "] w13 slice into the whole [" +
                               std::to_string(2 * d.padded_intermediate_size) + ", " + std::to_string(d.padded_hidden_size) +
                               "] parameter (param.copy_), and the padded sizes do not match it");
  }
}

RankGeometry rank_geometry(const ckpt::MoeLayer& layer, const LayerDecision& ld, const RankSplit& split, int rank) {
  const orc::Decision& d = ld.decision;
  RankGeometry g;
  g.hidden = layer.hidden_size;
  g.intermediate = layer.intermediate_size;
  g.padded_hidden = static_cast<uint64_t>(d.padded_hidden_size);
  g.padded_intermediate = static_cast<uint64_t>(d.padded_intermediate_size);
  g.tp_size = split.expert_parallel ? 1 : static_cast<uint64_t>(d.tp_size);
  g.tp_rank = split.expert_parallel ? 0 : static_cast<uint64_t>(rank);
  // gpt-oss' own loaders (openai MXFP4 and amd-quark exports) slice interleaved w13 rows.
  g.gpt_oss_interleaved = layer.recipe.w13_order == ckpt::W13Order::interleaved;
  g.gated = layer.gated;
  set_family_geometry(g, layer, orc::family_name(d.family), ld.model_dtype == orc::FloatType::float16 ? DType::F16 : DType::BF16, ld.fp8_is_fnuz);
  if (d.method_class == "MoeWNA16Method") set_moe_wna16_geometry(g);
  return g;
}

// One rank's packed tensor of a role with a packer layout: its storage shape, and the producer
// of one expert's slab (read the expert's canonical param, load it as vLLM would, pack it).
PackedTensorPlan packed_tensor(const ckpt::Checkpoint& checkpoint, const ckpt::MoeLayer& layer, const orc::Decision& d, const RoleSpec& rs,
                               const RankGeometry& g, uint64_t first_expert, const RankSplit& split, const SwigluFacts& swiglu) {
  // The loaded parameter's per-expert shape, from the summary of one expert's canonical param.
  const ckpt::ParamSummary* summary = nullptr;
  for (const auto& p : layer.params)
    if (p.name == rs.source_role) summary = &p;
  OwnedTensor probe(summary->dtype, summary->shape);
  OwnedTensor loaded = load_expert_param(rs.source_role, probe, g);
  PackedTensorPlan t;
  t.role = rs.role;
  t.name = layer.prefix + "." + rs.role;
  t.dtype = rs.layout->packed_dtype(loaded.dtype);
  std::vector<uint64_t> slab_shape;
  try {
    slab_shape = rs.layout->packed_shape(loaded.shape);
  } catch (const Error& e) {
    // The checkpoint is fine; this backend's weight preparation cannot take the per-rank
    // shape (vLLM fails while loading the layer), so the deployment is refused.
    if (e.kind() != ErrorKind::bad_input) throw;
    throw VllmLoadError(layer.prefix, "backend " + d.backend.value_or("?") + " / " + d.experts_class.value_or("?") + " cannot prepare " + rs.role + " at " +
                                          (split.ranks > 1 ? "this parallel size" : "this size") + " (vLLM fails while loading the layer): " + e.what());
  }
  t.shape = rs.layout->parameter_shape(split.local_experts, loaded.shape);
  t.layout = rs.layout->name();
  t.num_experts = split.local_experts;
  t.slab_bytes = byte_size(t.dtype, slab_shape);
  t.canonical_dtype = loaded.dtype;
  t.canonical_shape = loaded.shape;
  const ckpt::Checkpoint* ck = &checkpoint;
  const ckpt::MoeLayer* lay = &layer;
  auto layout = rs.layout;
  std::string role = rs.source_role;
  // A value stage reads the rank's other params once, on the first slab any thread produces.
  struct StageState {
    std::once_flag once;
    ValueStage::Prepared prepared;
  };
  std::shared_ptr<StageState> stage;
  if (rs.stage) {
    t.value_stage = rs.stage->name();
    stage = std::make_shared<StageState>();
  }
  const ValueStage* stage_def = rs.stage;
  const ReductionInput stage_input = rs.stage ? reduction_input(checkpoint, layer, rs.source_role, g, first_expert, split.local_experts, swiglu) : ReductionInput{};
  t.produce = [ck, lay, layout, role, g, first_expert, stage, stage_def, stage_input](uint64_t e, std::span<uint8_t> slab) {
    ckpt::ExpertParams params = ckpt::read_expert_params(*ck, *lay, first_expert + e, role);
    auto it = params.tensors.find(role);
    if (it == params.tensors.end()) throw_internal("expert " + std::to_string(first_expert + e) + " of " + lay->prefix + " has no " + role);
    OwnedTensor param = load_expert_param(role, std::move(it->second), g);
    if (stage) {
      std::call_once(stage->once, [&] { stage->prepared = stage_def->prepare(stage_input); });
      stage->prepared.change(e, param);
    }
    layout->pack(param.view(), slab);
  };
  return t;
}

// One MoE layer's plan: its refusals, its manifest entry and every rank's tensors.
// What decides where vLLM holds the layer's tensors (lib/convert/loader_facts.h).
LoaderQuery loader_query(const LayerDecision& ld, const artifact::Layer& m, const ConvertRequest& request, uint64_t local_experts) {
  LoaderQuery q;
  q.architecture = ld.query.architecture;
  q.checkpoint_expert_prefix = m.prefix;
  q.family = m.family;
  q.backend = m.backend;
  q.experts_class = m.experts_class;
  q.method_class = ld.decision.method_class;
  const auto& device = request.target_json.find("device");
  q.device = device != request.target_json.end() && device->is_string() ? device->get<std::string>() : "";
  q.lora = request.target_json.value("lora", false);
  q.num_local_experts = static_cast<int64_t>(local_experts);
  q.hidden_size = static_cast<int64_t>(m.padded_hidden_size);
  q.intermediate_size = static_cast<int64_t>(m.padded_intermediate_size);
  q.activation = m.activation;
  q.gated = m.gated;
  q.swiglu_limit = ld.query.swiglu_limit;
  q.swiglu_alpha = ld.query.swiglu_alpha;
  q.swiglu_beta = ld.query.swiglu_beta;
  q.situ_beta = ld.query.situ_beta;
  q.situ_linear_beta = ld.query.situ_linear_beta;
  q.per_tensor = m.family == "fp8" && m.weight_key == std::optional<std::string>("kFp8StaticTensorSym");
  return q;
}

std::vector<std::string> role_names(const RankPlan& rank) {
  std::vector<std::string> roles;
  for (const auto& t : rank.tensors) roles.push_back(t.role);
  return roles;
}

LayerPlan plan_layer(const ckpt::Checkpoint& checkpoint, const LayerDecision& ld, const ConvertRequest& request) {
  const ckpt::MoeLayer& layer = *ld.layer;
  const orc::Decision& d = ld.decision;
  const std::vector<RoleSpec> roles = role_specs(layer, d);
  LayerPlan lp;
  lp.manifest = manifest_layer(checkpoint, ld);
  const RankSplit split = split_over_ranks(layer, d);
  // The decision's sizes are one rank's (as vLLM's FusedMoE holds them); with several ranks
  // the manifest says so, since a reader cannot tell 1440 per rank from 1440 whole.
  if (split.ranks > 1) lp.manifest.intermediate_size_scope = artifact::kPerRankScope;
  refuse_bad_split(layer, d, split);
  const SwigluFacts swiglu{ld.query.swiglu_limit, ld.query.swiglu_beta};
  for (int rank = 0; rank < split.ranks; ++rank) {
    if (request.only_rank && *request.only_rank != rank) continue;
    const RankGeometry g = rank_geometry(layer, ld, split, rank);
    const uint64_t first_expert = split.expert_parallel ? split.local_experts * static_cast<uint64_t>(rank) : 0;
    RankPlan rp;
    rp.rank = rank;
    for (const RoleSpec& rs : roles) {
      if (rs.derivation) rp.tensors.push_back(derived_tensor(checkpoint, layer, rs.role, rs.derivation, g, first_expert, split.local_experts));
      else if (rs.reduction) rp.tensors.push_back(reduction_tensor(checkpoint, layer, rs.role, *rs.reduction, g, first_expert, split.local_experts, swiglu));
      else rp.tensors.push_back(packed_tensor(checkpoint, layer, d, rs, g, first_expert, split, swiglu));
    }
    lp.ranks.push_back(std::move(rp));
  }
  lp.manifest.vllm = vllm_layer_json(loader_query(ld, lp.manifest, request, split.local_experts), lp.ranks.empty() ? std::vector<std::string>{} : role_names(lp.ranks.front()));
  return lp;
}

}  // namespace


ConversionPlan build_conversion_plan(const ckpt::Checkpoint& checkpoint, const std::vector<LayerDecision>& decisions,
                                     const ConvertRequest& request) {
  ConversionPlan plan = plan_sources(checkpoint, request);
  std::set<std::string> expert_tensors;
  for (const LayerDecision& ld : decisions) {
    refuse_unconvertible(ld);
    refuse_unquantized_cast(ld);
    expert_tensors.insert(ld.layer->tensors.begin(), ld.layer->tensors.end());
    plan.layers.push_back(plan_layer(checkpoint, ld, request));
    plan.tp_size = std::max(plan.tp_size, split_over_ranks(*ld.layer, ld.decision).ranks);
  }
  for (const auto& name : checkpoint.shards->names())
    if (!expert_tensors.count(name)) plan.pass_through.push_back({name, *checkpoint.shards->find(name)});
  return plan;
}


}  // namespace moepack::convert
