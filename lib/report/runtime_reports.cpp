#include "lib/report/runtime_reports.h"

namespace moepack::report {
namespace {

nlohmann::ordered_json or_null(const std::optional<double>& v) { return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr); }

}  // namespace

nlohmann::ordered_json verify_json(const runtime::VerifyReport& r) {
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const auto& l : r.layers)
    layers.push_back({{"prefix", l.prefix}, {"family", l.family}, {"backend", l.backend}, {"ranks", l.ranks},
                      {"compared_with", l.compared_with.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(l.compared_with)},
                      {"max_abs_error", l.max_abs_error}, {"max_rel_error", l.max_rel_error}, {"tolerance", l.tolerance}, {"ok", l.ok},
                      {"note", l.note.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(l.note)},
                      {"fast_cpu", l.fast_cpu_isa.empty() ? nlohmann::ordered_json(nullptr)
                                                          : nlohmann::ordered_json{{"isa", l.fast_cpu_isa},
                                                                                 {"max_rel_error", l.fast_max_rel_error},
                                                                                 {"tolerance", l.fast_tolerance},
                                                                                 {"kernel_choices", l.fast_cpu_kernel_choices}}},
                      {"run", l.run}});
  return {{"ok", r.ok()},
          {"tokens", r.tokens},
          {"seed", r.seed},
          {"integrity", {{"files_checked", r.integrity.files_checked}, {"tensors_checked", r.integrity.tensors_checked},
                         {"expert_slabs_checked", r.integrity.expert_slabs_checked}, {"problems", r.integrity.problems}}},
          {"layers", layers},
          {"golden_problems", r.golden_problems},
          {"layers_run", r.layers_run},
          {"layers_total", r.layers.size()}};
}

nlohmann::ordered_json run_json(const runtime::RunReport& r, const runtime::RunOptions& o) {
  return {{"artifact", o.artifact},
          {"input", o.input},
          {"output", o.output},
          {"layer", r.layer},
          {"family", r.family},
          {"backend", r.backend},
          {"ranks", r.ranks},
          {"tokens", r.tokens},
          {"hidden_size", r.hidden_size},
          {"hidden_dtype", r.hidden_dtype},
          {"num_experts", r.num_experts},
          {"top_k", r.top_k},
          {"routing", r.routing},
          {"routing_method", r.routing_method},
          {"max_abs_output", r.max_abs_output},
          {"nonfinite_outputs", r.nonfinite_outputs}};
}

nlohmann::ordered_json bench_json(const runtime::BenchReport& r) {
  // Keys of the first version first, their meaning kept; later additions after them.
  auto peer_dtype = [](const runtime::OneDnnPeers& p) -> nlohmann::ordered_json {
    const std::string d = p.peer_dtype();
    return d.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(d);
  };
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  for (const auto& x : r.results)
    results.push_back({{"tokens", x.tokens},
                       {"ms", x.ms},
                       {"weight_bytes", x.weight_bytes},
                       {"gbps", x.gbps},
                       {"fraction_of_stream", x.fraction_of_stream},
                       {"gflops", x.gflops},
                       {"onednn_bf16_gflops", or_null(x.onednn.bf16_gflops)},
                       {"ratio_to_onednn", or_null(x.ratio_to_onednn)},
                       {"onednn_f32_gflops", or_null(x.onednn.f32_gflops)},
                       {"peer_dtype", peer_dtype(x.onednn)},
                       {"routings", x.routings},
                       {"rotation_bytes", x.rotation_bytes}});
  return {{"machine",
           {{"cpu", r.cpu},
            {"threads", r.threads},
            {"isa", r.isa},
            {"kernel_choices", r.kernel_choices},
            {"stream_read_gbps", r.stream_read_gbps},
            {"onednn_bf16_gflops", or_null(r.onednn.bf16_gflops)},
            {"allowed_cpus", r.allowed_cpus},
            {"onednn_f32_gflops", or_null(r.onednn.f32_gflops)},
            {"peer_dtype", peer_dtype(r.onednn)},
            {"onednn_shapes",
             {{{"m", r.onednn_rows}, {"k", r.padded_hidden_size}, {"n", r.w13_rows}}, {{"m", r.onednn_rows}, {"k", r.padded_intermediate_size}, {"n", r.padded_hidden_size}}}},
            {"last_level_cache_bytes", r.last_level_cache_bytes},
            {"onednn_isa", r.onednn_isa.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(r.onednn_isa)}}},
          {"layer", {{"prefix", r.prefix}, {"layout", r.layout}, {"num_experts", r.num_experts}, {"top_k", r.top_k}, {"hidden_size", r.hidden_size},
                     {"intermediate_size", r.intermediate_size}}},
          {"results", results}};
}

}  // namespace moepack::report
