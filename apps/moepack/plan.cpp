// `moepack plan`: the oracle's decision per MoE layer, with the known kernel defects it hits
// (lib/oracle/hazards). The layers come from a checkpoint (headers and config only), from
// --layer-json (lib/convert/layer_json), or from --family and the model flags; the deployment
// from the shared deployment flags. Parsing and printing only: lib/oracle decides,
// lib/convert applies the reader's refusals, lib/report builds the --json document.
#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "apps/moepack/command.h"
#include "apps/moepack/deployment_flags.h"
#include "formats/checkpoints/checkpoint.h"
#include "formats/checkpoints/hub_cache.h"
#include "lib/core/error.h"
#include "lib/core/json_output.h"
#include "lib/convert/layer_json.h"
#include "lib/convert/plan.h"
#include "lib/oracle/hazards.h"
#include "lib/oracle/oracle.h"
#include "lib/report/fleet_report.h"
#include "lib/report/inspect_report.h"
#include "lib/report/plan_report.h"

namespace moepack::cli {
namespace {

using json = nlohmann::ordered_json;
namespace orc = oracle;

struct PlanOptions {
  std::string checkpoint;
  std::string layer_json;
  DeploymentOptions deployment;
  bool json = false;
  // --family and the model flags (a layer described by hand)
  std::string family;
  std::string prefix = "moe";
  std::string quant_method;
  std::string method_class;
  std::string weight_key;
  std::string activation_key;
  std::string model_type;
  int hidden = 0;
  int intermediate = 0;
  int experts = 0;
  int top_k = 0;
  std::string activation = "silu";
  std::string routing = "RenormalizeNaive";
  std::string router_logits_dtype;
  bool has_bias = false;
  std::optional<double> swiglu_limit;
  int bits = 4;
  int group_size = -1;
  bool asymmetric = false;
  bool zero_points = false;
  bool desc_act = false;
  std::string actorder;
  std::string quark_scheme;
  bool static_input_scales = false;
};

[[noreturn]] void usage(const std::string& what) { throw Error(ErrorKind::usage, what); }

orc::MoeLayerQuery query_from_flags(const PlanOptions& o) {
  orc::MoeLayerQuery q;
  auto f = orc::parse_family(o.family);
  if (!f) usage("unknown --family '" + o.family + "'; expected mxfp4 nvfp4 fp8 mxfp8 wna16 int8 w4a8 w4a8_int8 unquantized");
  q.family = *f;
  q.prefix = o.prefix;
  q.quant_method = o.quant_method;
  q.method_class = o.method_class;
  q.weight_key = o.weight_key;
  q.activation_key = o.activation_key;
  q.model_type = o.model_type;
  q.hidden_size = o.hidden;
  q.moe_intermediate_size = o.intermediate;
  q.num_experts = o.experts;
  q.top_k = o.top_k;
  q.activation = o.activation;
  auto r = orc::parse_routing_method(o.routing);
  if (!r) usage("unknown --routing '" + o.routing + "'");
  q.routing = *r;
  if (!o.router_logits_dtype.empty()) {
    q.router_logits_dtype = orc::parse_float_type(o.router_logits_dtype);
    if (!q.router_logits_dtype) usage("unknown --router-logits-dtype '" + o.router_logits_dtype + "'");
  }
  q.has_bias = o.has_bias;
  q.swiglu_limit = o.swiglu_limit;
  q.weight_bits = o.bits;
  q.group_size = o.group_size;
  q.symmetric = !o.asymmetric;
  q.has_zero_points = o.zero_points;
  q.desc_act = o.desc_act;
  q.actorder = o.actorder;
  q.quark_ocp_mx_scheme = o.quark_scheme;
  q.static_input_scales = o.static_input_scales;
  return q;
}

// ---- Output ----

// A decision's identity for grouping the human output (prefix excluded).
std::string signature(const orc::Decision& d, const orc::Deployment& dep) {
  json j = report::plan_layer_json(d, dep);
  j.erase("prefix");
  return safe_json_text(j, -1);
}

void print_human(const orc::Deployment& dep, const std::vector<orc::Decision>& decisions) {
  std::cout << "target: " << dep.device.target_name << " (" << orc::describe_device(dep.device) << "), tp " << dep.parallel.tp
            << ", dp " << dep.parallel.dp << (dep.parallel.enable_expert_parallel ? ", ep" : "") << ", moe-backend " << dep.moe_backend
            << "\nreference: " << orc::oracle_reference() << "\n";
  // Identical decisions are printed once with every layer they cover.
  std::vector<std::pair<std::string, std::vector<const orc::Decision*>>> groups;
  for (const auto& d : decisions) {
    const std::string sig = signature(d, dep);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == sig; });
    if (it == groups.end()) groups.push_back({sig, {&d}});
    else it->second.push_back(&d);
  }
  for (const auto& [sig, members] : groups) {
    const orc::Decision& d = *members.front();
    std::cout << "\n";
    if (members.size() == 1) std::cout << "layer " << d.prefix << "\n";
    else std::cout << members.size() << " layers " << members.front()->prefix << " .. " << members.back()->prefix << "\n";
    std::cout << "  family " << orc::family_name(d.family) << ", method " << (d.quant_method.empty() ? "(none)" : d.quant_method) << " / "
              << d.method_class << "\n";
    std::cout << "  keys   " << d.weight_key.value_or("None") << " x " << d.activation_key.value_or("None") << "\n";
    if (d.error) {
      std::cout << "  REFUSED " << d.error->type << ": " << d.error->message << "\n";
    } else {
      std::cout << "  backend " << d.backend.value_or("-") << ", experts " << d.experts_class.value_or("-") << "\n";
      std::cout << "  sizes per rank: hidden " << d.hidden_size << " -> " << d.padded_hidden_size << ", intermediate " << d.intermediate_size
                << " -> " << d.padded_intermediate_size << " (experts " << d.num_local_experts << " of " << d.num_experts << ")\n";
      for (const auto& [role, layout] : d.tensor_layouts) std::cout << "    " << role << ": " << layout << "\n";
    }
    for (const auto& h : orc::find_hazards(d, dep)) std::cout << "  hazard: " << h.id << ": " << h.effect << " (seen: " << h.seen << ")\n";
    if (!d.candidates.empty()) std::cout << "  candidates, in the order tried:\n";
    for (const auto& c : d.candidates) {
      std::cout << "    " << (c.ok ? "ok  " : "no  ") << c.backend;
      if (!c.experts_class.empty()) std::cout << " / " << c.experts_class;
      if (!c.ok) std::cout << ": " << c.reason;
      std::cout << "\n";
    }
    for (const auto& n : d.notes) std::cout << "  note: " << n << "\n";
  }
}

void require_one_layer_source(const PlanOptions& o) {
  const int sources = (o.checkpoint.empty() ? 0 : 1) + (o.layer_json.empty() ? 0 : 1) + (o.family.empty() ? 0 : 1);
  if (sources != 1) usage("plan needs exactly one of: CKPT, --layer-json FILE, --family (with the model flags)");
}

// Several devices: every device planned with the same flags, one table (or one document).
// Refusals are the table's answer, not errors: exit 3 only when no device runs every layer.
// What plan asks about: a checkpoint's MoE layers, or layers a JSON file or the flags describe.
struct PlanSubject {
  ckpt::CheckpointLocation where;
  std::optional<ckpt::Checkpoint> checkpoint;
  std::vector<orc::MoeLayerQuery> queries;
  std::vector<std::string> reader_notes;
};

PlanSubject read_plan_subject(const PlanOptions& o) {
  require_one_layer_source(o);
  PlanSubject s;
  if (!o.checkpoint.empty()) {
    s.where = ckpt::locate_checkpoint(o.checkpoint);
    s.checkpoint = ckpt::open_checkpoint(s.where.path);
    s.reader_notes = s.checkpoint->notes;
  } else {
    s.queries = o.layer_json.empty() ? std::vector<orc::MoeLayerQuery>{query_from_flags(o)} : convert::read_layer_queries(o.layer_json);
  }
  return s;
}

// The decisions plan reports on one deployment: a checkpoint's include the refusals vLLM raises
// while loading its layers, as convert meets them.
std::vector<orc::Decision> decisions_for(const PlanSubject& s, const orc::Deployment& dep) {
  if (s.checkpoint) return convert::reported_decisions(*s.checkpoint, convert::decide_layers(*s.checkpoint, dep));
  std::vector<orc::Decision> decisions;
  for (const auto& q : s.queries) decisions.push_back(orc::decide(q, dep));
  return decisions;
}

int run_fleet_plan(const PlanOptions& o, const std::vector<std::string>& targets) {
  std::vector<report::TargetPlan> plans;
  for (const auto& name : targets) {
    DeploymentOptions flags = o.deployment;
    flags.target = name;
    plans.push_back({build_deployment(flags), {}});
  }
  const PlanSubject subject = read_plan_subject(o);
  const std::vector<std::string>& reader_notes = subject.reader_notes;
  const ckpt::CheckpointLocation& where = subject.where;
  for (auto& p : plans) p.decisions = decisions_for(subject, p.deployment);
  if (o.json) {
    json document = report::fleet_json(plans, reader_notes);
    if (where.from_hub_cache()) document["hub"] = report::hub_json(where);
    std::cout << safe_json_text(document) << std::endl;
  } else {
    if (where.from_hub_cache()) std::cout << "checkpoint: " << report::hub_line(where) << "\n";
    std::cout << report::fleet_table_text(plans);
    for (const auto& n : reader_notes) std::cout << "note: " << n << "\n";
  }
  if (report::fleet_has_a_device_for_every_layer(plans)) return 0;
  std::cerr << "moepack: error: no device of " << o.deployment.target << " runs every MoE layer (each refusal is given above)\n";
  return static_cast<int>(ErrorKind::refused);
}

int run_plan(const PlanOptions& o) {
  if (names_several_targets(o.deployment.target))
    return run_fleet_plan(o, target_names(o.deployment.target));
  const orc::Deployment dep = build_deployment(o.deployment);
  const PlanSubject subject = read_plan_subject(o);
  const std::vector<std::string>& reader_notes = subject.reader_notes;
  const ckpt::CheckpointLocation& where = subject.where;
  const std::vector<orc::Decision> decisions = decisions_for(subject, dep);

  if (o.json) {
    json document = report::plan_json(dep, decisions, reader_notes);
    if (where.from_hub_cache()) document["hub"] = report::hub_json(where);
    std::cout << safe_json_text(document) << std::endl;
  } else {
    if (where.from_hub_cache()) std::cout << "checkpoint: " << report::hub_line(where) << "\n";
    print_human(dep, decisions);
    if (decisions.empty()) std::cout << "\nno MoE layers\n";
  }
  // Refusals are reported here rather than thrown, so --json prints one document. Layers refused
  // for the same reason (48 identical layers of a real model) make one line naming the first
  // and last of them.
  int rc = 0;
  std::vector<std::pair<std::string, std::vector<std::string>>> refusals;  // message -> prefixes, in order
  for (const auto& d : decisions) {
    if (!d.error) continue;
    rc = static_cast<int>(ErrorKind::refused);
    const std::string message = d.error->type + ": " + d.error->message;
    auto it = std::find_if(refusals.begin(), refusals.end(), [&](const auto& r) { return r.first == message; });
    if (it == refusals.end()) refusals.push_back({message, {d.prefix}});
    else it->second.push_back(d.prefix);
  }
  for (const auto& [message, prefixes] : refusals) {
    const std::string where =
        prefixes.size() == 1 ? prefixes.front() : std::to_string(prefixes.size()) + " layers " + prefixes.front() + " .. " + prefixes.back();
    std::cerr << "moepack: error: " << where << ": " << message << "\n";
  }
  return rc;
}

CommandRegistration reg(20, [](CLI::App& app) {
  auto opts = std::make_shared<PlanOptions>();
  auto* sub = app.add_subcommand("plan", "Show the backend vLLM would give each MoE layer on a target, with every candidate tried");
  sub->add_option("checkpoint", opts->checkpoint, "Checkpoint directory, .safetensors file, or model id in the Hugging Face cache (org/name[@revision])");
  sub->add_option("--layer-json", opts->layer_json, "Describe the layer(s) in a JSON file instead of a checkpoint");
  add_deployment_flags(*sub, opts->deployment, false);
  sub->add_flag("--json", opts->json, "Print the plan as JSON");
  auto* model = "Layer described by hand (instead of CKPT)";
  sub->add_option("--family", opts->family, "mxfp4 nvfp4 fp8 mxfp8 wna16 int8 w4a8 w4a8_int8 unquantized")->group(model);
  sub->add_option("--prefix", opts->prefix, "Layer name to report")->group(model);
  sub->add_option("--quant-method", opts->quant_method, "vLLM quantization method (gpt_oss_mxfp4, modelopt_fp4, fp8, auto_gptq, ...)")->group(model);
  sub->add_option("--method-class", opts->method_class, "vLLM MoE method class (default: the one the method uses)")->group(model);
  sub->add_option("--weight-key", opts->weight_key, "Weight QuantKey constant name (kMxfp4Static, ...)")->group(model);
  sub->add_option("--activation-key", opts->activation_key, "Activation QuantKey constant name (kNvfp4Dynamic, ...)")->group(model);
  sub->add_option("--model-type", opts->model_type, "config.json model_type")->group(model);
  sub->add_option("--hidden", opts->hidden, "Hidden size")->group(model);
  sub->add_option("--intermediate", opts->intermediate, "MoE intermediate size per expert, before tensor parallelism")->group(model);
  sub->add_option("--experts", opts->experts, "Number of experts")->group(model);
  sub->add_option("--top-k", opts->top_k, "Experts per token")->group(model);
  sub->add_option("--moe-activation", opts->activation, "MoE activation (silu, swigluoai, relu2_no_mul, ...)")->group(model)->capture_default_str();
  sub->add_option("--routing", opts->routing, "Routing method (RenormalizeNaive, DeepSeekV3, ...)")->group(model)->capture_default_str();
  sub->add_option("--router-logits-dtype", opts->router_logits_dtype, "Router logits dtype (default: the model dtype)")->group(model);
  sub->add_flag("--has-bias", opts->has_bias, "Experts have biases")->group(model);
  sub->add_option("--swiglu-limit", opts->swiglu_limit, "SwiGLU clamp limit")->group(model);
  sub->add_option("--bits", opts->bits, "Integer weight bits (WNA16, W4A8)")->group(model)->capture_default_str();
  sub->add_option("--group-size", opts->group_size, "Integer weight group size (-1: channel-wise)")->group(model)->capture_default_str();
  sub->add_flag("--asymmetric", opts->asymmetric, "Integer weights have zero points")->group(model);
  sub->add_flag("--zero-points", opts->zero_points, "The checkpoint carries zero points (AWQ zero_point, MoeWNA16 has_zp)")->group(model);
  sub->add_flag("--desc-act", opts->desc_act, "GPTQ act-order")->group(model);
  sub->add_option("--actorder", opts->actorder, "compressed-tensors actorder (group, weight, dynamic)")->group(model);
  sub->add_option("--quark-scheme", opts->quark_scheme, "Quark OCP-MX scheme (w_mxfp4, w_mxfp4_a_fp8, w_mxfp4_a_mxfp4, ...)")->group(model);
  sub->add_flag("--static-input-scales", opts->static_input_scales, "Activation scales are static (calibrated)")->group(model);
  sub->callback([opts] {
    global_flags().json = opts->json;
    set_exit_code(run_plan(*opts));
  });
});

}  // namespace
}  // namespace moepack::cli
