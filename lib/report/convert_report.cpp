#include "lib/report/convert_report.h"

#include <string>

#include "lib/core/dtype.h"

namespace moepack::report {

using ojson = nlohmann::ordered_json;

ojson dry_run_json(const convert::ConversionPlan& plan, const std::vector<convert::ShardAssignment>& shards) {
  ojson files = ojson::array();
  for (const auto& s : shards)
    files.push_back({{"file", s.file_name}, {"rank", s.rank < 0 ? ojson(nullptr) : ojson(s.rank)}, {"bytes", s.data_bytes}, {"tensors", s.tensor_names}});
  ojson layers = ojson::array();
  for (const auto& l : plan.layers) {
    ojson ranks = ojson::array();
    for (const auto& r : l.ranks) {
      ojson tensors = ojson::object();
      for (const auto& t : r.tensors)
        tensors[t.role] = {{"name", t.name}, {"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape},
                           {"layout", t.layout}, {"bytes", t.num_experts * t.slab_bytes}};
      ranks.push_back({{"rank", r.rank}, {"tensors", tensors}});
    }
    layers.push_back({{"prefix", l.manifest.prefix}, {"backend", l.manifest.backend}, {"experts_class", l.manifest.experts_class},
                      {"padded_hidden_size", l.manifest.padded_hidden_size},
                      {"padded_intermediate_size", l.manifest.padded_intermediate_size}, {"ranks", ranks}});
  }
  return {{"dry_run", true}, {"target", plan.target}, {"layers", layers}, {"files", files},
          {"copied_files", plan.copied_files}, {"pass_through_tensors", plan.pass_through.size()}};
}

}  // namespace moepack::report
