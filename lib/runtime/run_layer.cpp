#include "lib/runtime/run_layer.h"

#include <cmath>
#include <cstring>
#include <filesystem>

#include "formats/safetensors/file.h"
#include "formats/safetensors/writer.h"
#include "lib/runtime/artifact_runtime.h"
#include "lib/core/cpus.h"
#include "lib/core/error.h"
#include "lib/core/tensor.h"
#include "lib/experts/dequant.h"

namespace moepack::runtime {
namespace ex = experts;
namespace {

std::string dims(uint64_t a, uint64_t b) { return "[" + std::to_string(a) + ", " + std::to_string(b) + "]"; }

const st::TensorInfo& need(const st::File& f, const std::string& name, const std::string& rule) {
  const st::TensorInfo* t = f.find(name);
  if (!t) throw_bad_input(f.path(), name, rule);
  return *t;
}

// A 2-D tensor whose first dimension is `tokens` (when known) and second `cols` (when given).
void check_matrix(const st::File& f, const st::TensorInfo& t, std::optional<uint64_t> tokens, std::optional<uint64_t> cols, const std::string& cols_what) {
  if (t.shape.size() != 2) throw_bad_input(f.path(), t.name, "shape " + shape_string(t.shape) + " is not 2-D " + "[tokens, " + cols_what + "]");
  if (tokens && t.shape[0] != *tokens)
    throw_bad_input(f.path(), t.name, "shape " + shape_string(t.shape) + " has " + std::to_string(t.shape[0]) + " tokens; hidden_states has " + std::to_string(*tokens));
  if (cols && t.shape[1] != *cols)
    throw_bad_input(f.path(), t.name, "shape " + shape_string(t.shape) + " has " + std::to_string(t.shape[1]) + " columns, expected " + cols_what + " = " + std::to_string(*cols));
}

// Float values of an F32/BF16/F16 tensor, every one finite.
std::vector<float> finite_floats(const st::File& f, const st::TensorInfo& t, bool f32_only) {
  const bool ok = t.dtype == DType::F32 || (!f32_only && (t.dtype == DType::BF16 || t.dtype == DType::F16));
  if (!ok) throw_bad_input(f.path(), t.name, "dtype " + std::string(dtype_name(t.dtype)) + " is not " + (f32_only ? "F32" : "F32, BF16 or F16"));
  OwnedTensor o;
  o.dtype = t.dtype;
  o.shape = t.shape;
  o.bytes = f.read_all(t);
  std::vector<float> v = ex::float_values(o);
  const uint64_t cols = t.shape.size() == 2 && t.shape[1] ? t.shape[1] : 1;
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      throw_bad_input(f.path(), t.name, std::string(std::isnan(v[i]) ? "NaN" : "an infinity") + " at " + dims(i / cols, i % cols) + ": run takes finite values only");
  return v;
}

std::vector<int64_t> integer_ids(const st::File& f, const st::TensorInfo& t) {
  if (t.dtype != DType::I32 && t.dtype != DType::I64) throw_bad_input(f.path(), t.name, "dtype " + std::string(dtype_name(t.dtype)) + " is not I32 or I64");
  OwnedTensor o;
  o.dtype = t.dtype;
  o.shape = t.shape;
  o.bytes = f.read_all(t);
  return integer_values(o);
}

template <typename T>
std::span<const uint8_t> as_bytes(const std::vector<T>& v) {
  return {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(T)};
}

}  // namespace

RunReport run_layer(const RunOptions& o) {
  ArtifactRuntime runtime(o.artifact);
  const artifact::Manifest& m = runtime.manifest();
  if (m.layers.empty()) throw_bad_input(runtime.manifest_path(), "", "the artifact has no MoE layers to run");
  size_t li = 0;
  if (o.layer) {
    li = runtime.layer_index(*o.layer);
  } else if (m.layers.size() > 1) {
    std::string known;
    for (const auto& l : m.layers) known += (known.empty() ? "" : ", ") + l.prefix;
    throw Error(ErrorKind::usage, "run: the artifact has " + std::to_string(m.layers.size()) + " MoE layers; pick one with --layer (" + known + ")");
  }
  const artifact::Layer& L = m.layers[li];
  if (auto why = runtime.cannot_run(li)) throw_bad_input(runtime.manifest_path(), L.prefix, *why);
  const uint64_t H = L.hidden_size, E = L.num_experts;

  std::error_code ec;
  if (!std::filesystem::is_regular_file(o.input, ec)) throw_bad_input(o.input, "", "no such file: --input takes a safetensors file");
  const st::File in(o.input);
  const st::TensorInfo& hs = need(in, "hidden_states", "missing: run needs hidden_states [tokens, hidden] (F32, BF16 or F16)");
  check_matrix(in, hs, std::nullopt, H, "the layer's hidden size");
  const uint64_t T = hs.shape[0];
  if (T == 0) throw_bad_input(in.path(), hs.name, "shape " + shape_string(hs.shape) + " holds no tokens");
  const std::vector<float> x = finite_floats(in, hs, false);

  const st::TensorInfo* logits = in.find("router_logits");
  const st::TensorInfo* ids = in.find("topk_ids");
  const st::TensorInfo* weights = in.find("topk_weights");
  RunReport report;
  ex::Routing routing;
  if (logits && (ids || weights))
    throw_bad_input(in.path(), "router_logits", "given together with " + std::string(ids ? "topk_ids" : "topk_weights") + ": give router_logits or topk_ids + topk_weights, not both");
  if (logits) {
    check_matrix(in, *logits, T, E, "the layer's number of experts");
    // DeepSeek-V4's hash layers pick their experts by token id (the gate's tid2eid table).
    std::vector<int64_t> token_ids;
    if (const uint64_t vocab = runtime.hash_vocab(li)) {
      const st::TensorInfo* input_ids = in.find("input_ids");
      if (!input_ids)
        throw_bad_input(in.path(), "input_ids", "missing: layer " + L.prefix + " routes by token id (DeepSeek-V4 hash MoE, tid2eid): give input_ids [tokens] (I32 or I64) beside router_logits");
      if (input_ids->shape.size() != 1 || input_ids->shape[0] != T)
        throw_bad_input(in.path(), input_ids->name, "shape " + shape_string(input_ids->shape) + ", expected [" + std::to_string(T) + "] (one id per token)");
      token_ids = integer_ids(in, *input_ids);
      for (size_t t = 0; t < token_ids.size(); ++t)
        if (token_ids[t] < 0 || static_cast<uint64_t>(token_ids[t]) >= vocab)
          throw_bad_input(in.path(), input_ids->name, "token " + std::to_string(t) + " has id " + std::to_string(token_ids[t]) + ", outside the tid2eid table's " + std::to_string(vocab) + " rows");
    }
    routing = runtime.route(li, finite_floats(in, *logits, false), T, token_ids.empty() ? nullptr : &token_ids);
    report.routing = "router_logits";
    report.routing_method = L.routing->method;
  } else if (ids || weights) {
    if (!ids) throw_bad_input(in.path(), "topk_ids", "missing: topk_weights is given, and bypassing the router needs both topk_ids and topk_weights");
    if (!weights) throw_bad_input(in.path(), "topk_weights", "missing: topk_ids is given, and bypassing the router needs both topk_ids and topk_weights");
    check_matrix(in, *ids, T, std::nullopt, "k");
    check_matrix(in, *weights, T, ids->shape[1], "k of topk_ids");
    routing = runtime.routing_from(li, integer_ids(in, *ids), finite_floats(in, *weights, true), T, ids->shape[1], in.path(), ids->name, weights->name);
    report.routing = "topk_ids";
    report.routing_method = "given";
  } else {
    throw_bad_input(in.path(), "router_logits", "missing: run needs router_logits [tokens, experts], or topk_ids and topk_weights [tokens, k]");
  }

  const std::vector<float> y = runtime.run(li, x, routing, T, thread_count(0));  // the same bits for any thread count

  std::vector<int32_t> out_ids(routing.ids.begin(), routing.ids.end());
  std::vector<st::TensorSpec> specs = {{"output", DType::F32, {T, H}}, {"topk_ids", DType::I32, {T, routing.top_k}}, {"topk_weights", DType::F32, {T, routing.top_k}}};
  st::sort_like_reference_writer(specs);
  st::Writer w(o.output, specs, {{"layer", L.prefix}, {"routing", report.routing}});
  for (const auto& s : specs) {
    if (s.name == "output") w.write(as_bytes(y));
    else if (s.name == "topk_ids") w.write(as_bytes(out_ids));
    else w.write(as_bytes(routing.weights));
  }
  w.commit();

  report.layer = L.prefix;
  report.family = L.family;
  report.backend = L.backend;
  report.hidden_dtype = std::string(dtype_name(hs.dtype));
  report.tokens = T;
  report.hidden_size = H;
  report.num_experts = E;
  report.top_k = routing.top_k;
  report.ranks = L.ranks.size();
  for (float v : y) {
    if (std::isfinite(v)) report.max_abs_output = std::max(report.max_abs_output, static_cast<double>(std::fabs(v)));
    else ++report.nonfinite_outputs;
  }
  return report;
}

}  // namespace moepack::runtime
