#include "lib/report/diff_report.h"

namespace moepack::report {

using ojson = nlohmann::ordered_json;

namespace {

template <typename T>
ojson or_null(const std::optional<T>& v) {
  return v ? ojson(*v) : ojson(nullptr);
}

ojson tensor_json(const artifact::DiffTensor& t) { return {{"file", t.file}, {"dtype", t.dtype}, {"shape", t.shape}}; }

}  // namespace

ojson diff_json(const artifact::DiffReport& r) {
  auto side = [](const artifact::DiffSide& s) {
    return ojson{{"path", s.path}, {"kind", s.kind}, {"safetensors_files", s.safetensors_files}, {"tensors", s.tensors}};
  };
  auto one_sided = [](const std::vector<artifact::OneSidedTensor>& v) {
    ojson arr = ojson::array();
    for (const auto& t : v) arr.push_back({{"name", t.key}, {"file", t.tensor.file}, {"dtype", t.tensor.dtype}, {"shape", t.tensor.shape}});
    return arr;
  };
  ojson different = ojson::array();
  for (const auto& d : r.different) {
    const st::TensorComparison& c = d.comparison;
    different.push_back({{"name", d.key},
                         {"a", tensor_json(d.a)},
                         {"b", tensor_json(d.b)},
                         {"dtype_differs", c.dtype_differs},
                         {"shape_differs", c.shape_differs},
                         {"bytes_compared", c.bytes_compared},
                         {"differing_bytes", c.bytes_compared ? ojson(c.differing_bytes) : ojson(nullptr)},
                         {"first_diff_byte", or_null(c.first_diff_byte)},
                         {"values_compared", c.values_compared},
                         {"differing_elements", c.values_compared ? ojson(c.differing_elements) : ojson(nullptr)},
                         {"first_diff_element", or_null(c.first_diff_element)},
                         {"max_abs_diff", c.values_compared ? ojson(c.max_abs_diff) : ojson(nullptr)},
                         {"nonfinite_mismatches", c.values_compared ? ojson(c.nonfinite_mismatches) : ojson(nullptr)}});
  }
  ojson manifest = nullptr;
  if (r.manifests_compared) {
    ojson diffs = ojson::array();
    for (const auto& m : r.manifest) diffs.push_back({{"path", m.path}, {"in_a", m.a.has_value()}, {"in_b", m.b.has_value()}, {"a", or_null(m.a)}, {"b", or_null(m.b)}});
    manifest = {{"differences", diffs}};
  }
  ojson files_different = ojson::array();
  for (const auto& f : r.files_different)
    files_different.push_back({{"name", f.name}, {"a_bytes", f.a_bytes}, {"b_bytes", f.b_bytes}, {"first_diff_byte", f.first_diff_byte}});
  return {{"identical", r.identical()},
          {"a", side(r.a)},
          {"b", side(r.b)},
          {"tensors", {{"compared", r.tensors_compared}, {"identical", r.tensors_identical}, {"only_in_a", one_sided(r.only_in_a)},
                       {"only_in_b", one_sided(r.only_in_b)}, {"different", different}}},
          {"manifest", manifest},
          {"files", {{"only_in_a", r.files_only_in_a}, {"only_in_b", r.files_only_in_b}, {"different", files_different}}}};
}

}  // namespace moepack::report
