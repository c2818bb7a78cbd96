// `moepack inspect CKPT [--json] [--check-values]`: what a checkpoint is (docs/CLI.md). Parsing and
// printing only; everything it reports comes from formats/checkpoints, and the JSON document
// from lib/report.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "apps/moepack/command.h"
#include "formats/artifact/manifest.h"
#include "formats/checkpoints/checkpoint.h"
#include "formats/checkpoints/hub_cache.h"
#include "lib/core/error.h"
#include "lib/core/json_output.h"
#include "lib/core/tensor.h"
#include "lib/report/inspect_report.h"

namespace moepack::cli {
namespace {

struct InspectOptions {
  std::string checkpoint;
  bool json = false;
  bool check_values = false;
};

// Built digit by digit rather than by inserting commas: GCC 12 at -O3 reports a false array-bounds
// overflow inside std::string::insert here once the headers come precompiled.
std::string with_commas(uint64_t n) {
  const std::string digits = std::to_string(n);
  std::string s;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) s += ',';
    s += digits[i];
  }
  return s;
}

// Two layers print as one line when everything but their prefix and index agrees.
std::string layer_signature(const ckpt::MoeLayer& l) {
  nlohmann::json j = report::inspect_layer_json(l);
  j.erase("prefix");
  j.erase("layer_index");
  return safe_json_text(j, -1);
}

std::string layer_range(const std::vector<const ckpt::MoeLayer*>& group) {
  if (group.front()->layer_index < 0) return group.front()->prefix;
  if (group.size() == 1) return "layer " + std::to_string(group.front()->layer_index);
  return "layers " + std::to_string(group.front()->layer_index) + "-" + std::to_string(group.back()->layer_index);
}

std::string shape_text(const std::vector<uint64_t>& shape) { return shape_string(shape); }

// The MoE layers, consecutive layers that agree in everything but their index on one line.
void print_layers(const ckpt::Checkpoint& c, std::ostringstream& out) {
  if (c.layers.empty()) {
    out << "  MoE layers   none\n";
    return;
  }
  out << "  MoE layers   " << c.layers.size() << "\n";
  std::vector<std::vector<const ckpt::MoeLayer*>> groups;
  std::string last_sig;
  for (const auto& l : c.layers) {
    std::string sig = layer_signature(l);
    bool extends = !groups.empty() && sig == last_sig && l.layer_index >= 0 && groups.back().back()->layer_index + 1 == l.layer_index;
    if (extends) groups.back().push_back(&l);
    else groups.push_back({&l});
    last_sig = sig;
  }
  for (const auto& g : groups) {
    const auto& l = *g.front();
    const auto& q = l.quant;
    out << "    " << layer_range(g) << ": " << l.num_experts << " experts, " << q.scheme << (l.gated ? "" : ", not gated") << ", " << human_bytes(l.source_bytes) << " per layer\n";
    if (!c.has_config) {
      out << "      names      " << l.prefix << (g.size() > 1 ? " (and the other layers)" : "") << ", " << ckpt::naming_name(l.naming) << "\n";
      continue;
    }
    out << "      vLLM       " << (q.method.quant_method.empty() ? "(unquantized)" : q.method.quant_method) << " / " << q.method.moe_method << "\n";
    out << "      oracle     " << q.method.oracle_family << ", weight " << (q.method.weight_key.empty() ? "none" : q.method.weight_key) << ", activation "
        << (q.method.activation_key.empty() ? "none" : q.method.activation_key) << "\n";
    if (q.on_sm90)
      out << "      on SM90    " << q.on_sm90->moe_method << " (" << q.on_sm90->oracle_family << ", " << q.on_sm90->weight_key << " x " << q.on_sm90->activation_key << ")\n";
    if (!q.unsupported.empty()) out << "      refused    " << q.unsupported << "\n";
    out << "      names      " << l.prefix << (g.size() > 1 ? " (and the other layers)" : "") << ", " << ckpt::naming_name(l.naming) << ", w13 " << ckpt::w13_order_name(l.recipe.w13_order) << "\n";
    out << "      per expert";
    for (size_t i = 0; i < l.params.size(); ++i)
      out << (i ? "\n                 " : " ") << l.params[i].name << " " << dtype_name(l.params[i].dtype) << " " << shape_text(l.params[i].shape);
    out << "\n";
  }
}

// What --check-values found.
void print_value_scan(const ckpt::ValueScan& scan, std::ostringstream& out) {
  out << "  values       " << with_commas(scan.tensors_scanned) << " tensors, " << human_bytes(scan.bytes_scanned) << " scanned: ";
  if (!scan.bad_values) {
    out << "no NaN/Inf\n";
  } else {
    out << with_commas(scan.bad_values) << " bad value" << (scan.bad_values == 1 ? "" : "s") << " in " << scan.per_tensor.size() << " tensor" << (scan.per_tensor.size() == 1 ? "" : "s") << "\n";
    for (const auto& [name, count] : scan.per_tensor) out << "    " << name << ": " << with_commas(count) << "\n";
    for (const auto& fnd : scan.listed) out << "    " << fnd.tensor << "[" << fnd.element << "] = " << fnd.what << "\n";
    if (scan.listed.size() < scan.bad_values) out << "    (first " << scan.listed.size() << " listed)\n";
  }
}

void print_human(const ckpt::Checkpoint& c, const InspectOptions& o, const ckpt::CheckpointLocation& where, const ckpt::ValueScan* scan,
                 const artifact::Manifest* packed) {
  const auto& f = c.facts;
  std::ostringstream out;
  out << o.checkpoint << "\n";
  if (where.from_hub_cache()) out << "  hub cache    " << report::hub_line(where) << "\n";
  if (packed) {
    out << "  artifact     " << report::artifact_line(*packed) << "\n";
    out << "               (its experts are packed for that target: `moepack verify` runs them, `moepack diff` compares them;\n"
        << "               what follows is the directory read as a checkpoint)\n";
  }
  out << "  format       " << report::family_text(c) << ": " << c.scheme << "\n";
  if (!f.model_type.empty() || !f.architecture.empty())
    out << "  model        " << (f.model_type.empty() ? "?" : f.model_type) << (f.architecture.empty() ? "" : " (" + f.architecture + ")") << (f.dtype.empty() ? "" : ", " + f.dtype) << "\n";
  if (f.hidden_size) {
    out << "  shape        hidden " << f.hidden_size << ", expert width " << f.moe_intermediate_size << ", " << f.num_experts << " experts";
    if (f.num_shared_experts) out << " + " << f.num_shared_experts << " shared";
    out << ", top-" << f.top_k;
    if (f.num_hidden_layers) out << ", " << f.num_hidden_layers << " layers";
    out << "\n";
    out << "  moe          activation " << f.activation << ", routing " << f.routing_method << " (" << f.scoring_func << (f.renormalize ? ", renormalize" : "")
        << (f.has_e_score_correction_bias ? ", score correction bias" : "") << (f.n_group ? ", " + std::to_string(f.n_group) + " groups" : "")
        << (f.num_hash_layers ? ", the first " + std::to_string(f.num_hash_layers) + " layers by token id (gate.tid2eid)" : "") << ")";
    if (f.has_bias) out << ", biases";
    if (f.swiglu_limit) out << ", swiglu limit " << *f.swiglu_limit;
    out << "\n";
  }
  out << "  tensors      " << with_commas(c.tensor_count()) << " in " << c.shards->files().size() << " file" << (c.shards->files().size() == 1 ? "" : "s") << ", "
      << human_bytes(c.total_bytes) << "\n";
  if (!c.has_config) {
    // Without a config.json the tensors are what there is to describe.
    constexpr size_t kListed = 40;
    size_t listed = 0;
    for (const auto& f : c.shards->files()) {
      for (const auto& [k, v] : f->header().metadata) out << "  metadata     " << k << " = " << v << "\n";
      for (const auto& t : f->header().tensors)
        if (listed++ < kListed) out << "    " << t.name << "  " << dtype_name(t.dtype) << " " << shape_string(t.shape) << "  " << human_bytes(t.num_bytes()) << "\n";
    }
    if (listed > kListed) out << "    ... and " << with_commas(listed - kListed) << " more (--json lists all)\n";
  }
  print_layers(c, out);
  for (const auto& n : c.notes) out << "  note         " << n << "\n";
  if (scan) print_value_scan(*scan, out);
  std::cout << out.str();
}

// The manifest when CKPT is a moepack artifact's directory (nullopt otherwise; a manifest that
// does not read is reported as bad input, as verify would).
std::optional<artifact::Manifest> artifact_manifest(const std::string& path) {
  const std::filesystem::path manifest = std::filesystem::path(path) / "moepack.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(manifest, ec)) return std::nullopt;
  return artifact::read_manifest(manifest.string());
}

int run_inspect(const InspectOptions& o) {
  const ckpt::CheckpointLocation where = ckpt::locate_checkpoint(o.checkpoint);
  ckpt::Checkpoint c = ckpt::open_checkpoint(where.path);
  const std::optional<artifact::Manifest> packed = artifact_manifest(where.path);
  std::optional<ckpt::ValueScan> scan;
  if (o.check_values) scan = ckpt::scan_values(c);
  const std::string error = scan ? report::bad_values_message(*scan) : std::string();
  if (o.json) {
    nlohmann::json j = report::inspect_json(c, o.checkpoint, scan ? &*scan : nullptr);
    if (packed) j["artifact"] = report::artifact_json(*packed);
    if (where.from_hub_cache()) j["hub"] = report::hub_json(where);
    std::cout << safe_json_text(j) << std::endl;
  } else {
    print_human(c, o, where, scan ? &*scan : nullptr, packed ? &*packed : nullptr);
  }
  if (!error.empty()) {
    std::fprintf(stderr, "moepack: error: %s\n", error.c_str());
    return static_cast<int>(ErrorKind::bad_input);
  }
  return 0;
}

CommandRegistration reg(10, [](CLI::App& app) {
  auto opts = std::make_shared<InspectOptions>();
  auto* sub = app.add_subcommand("inspect", "Describe a checkpoint: format, quantization scheme, MoE layers, experts, model facts");
  sub->add_option("CKPT", opts->checkpoint, "Checkpoint directory, .safetensors file, or model id in the Hugging Face cache (org/name[@revision])")->required();
  sub->add_flag("--json", opts->json, "Print one JSON object (shape documented in moepack-inspect(1))");
  sub->add_flag("--check-values", opts->check_values, "Also scan tensor data for NaN/Inf and NaN scales (exit 4 if any)");
  sub->callback([opts] {
    global_flags().json = opts->json;
    set_exit_code(run_inspect(*opts));
  });
});

}  // namespace
}  // namespace moepack::cli
