// `moepack diff A B [--json]` (docs/CLI.md): two artifacts or checkpoints compared tensor by tensor,
// and for two artifacts their manifests (formats/artifact/diff). Exit 0 when identical, 5 when
// they differ. Parsing and printing only; the --json document is lib/report's.
#include <cstdio>
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "apps/moepack/command.h"
#include "formats/checkpoints/hub_cache.h"
#include "formats/artifact/diff.h"
#include "lib/core/error.h"
#include "lib/core/json_output.h"
#include "lib/core/tensor.h"
#include "lib/report/diff_report.h"

namespace moepack::cli {
namespace {
using ojson = nlohmann::ordered_json;

struct DiffCliOptions {
  std::string a, b;
  bool json = false;
};

std::string brief(const std::optional<ojson>& v) {
  if (!v) return "(absent)";
  std::string s = safe_json_text(*v, -1);
  return s.size() > 100 ? s.substr(0, 97) + "..." : s;
}

std::string tensor_text(const artifact::DiffTensor& t) { return t.dtype + " " + shape_string(t.shape) + " in " + t.file; }

void print_text(const artifact::DiffReport& r) {
  auto side = [](const char* label, const artifact::DiffSide& s) {
    std::printf("%s %s (%s: %llu tensors in %llu safetensors files)\n", label, s.path.c_str(), s.kind.c_str(), static_cast<unsigned long long>(s.tensors),
                static_cast<unsigned long long>(s.safetensors_files));
  };
  side("A", r.a);
  side("B", r.b);
  std::printf("tensors: %llu compared, %llu identical, %zu different, %zu only in A, %zu only in B\n", static_cast<unsigned long long>(r.tensors_compared),
              static_cast<unsigned long long>(r.tensors_identical), r.different.size(), r.only_in_a.size(), r.only_in_b.size());
  for (const auto& t : r.only_in_a) std::printf("  only in A  %s (%s)\n", t.key.c_str(), tensor_text(t.tensor).c_str());
  for (const auto& t : r.only_in_b) std::printf("  only in B  %s (%s)\n", t.key.c_str(), tensor_text(t.tensor).c_str());
  for (const auto& d : r.different) {
    const st::TensorComparison& c = d.comparison;
    std::printf("  differs    %s", d.key.c_str());
    if (c.dtype_differs || c.shape_differs) std::printf(": %s vs %s", tensor_text(d.a).c_str(), tensor_text(d.b).c_str());
    else std::printf(" (%s)", tensor_text(d.a).c_str());
    std::printf("\n");
    if (c.bytes_compared && c.first_diff_byte)
      std::printf("             %llu bytes differ, the first at byte %llu of the tensor\n", static_cast<unsigned long long>(c.differing_bytes),
                  static_cast<unsigned long long>(*c.first_diff_byte));
    else if (c.bytes_compared)
      std::printf("             same bytes\n");
    if (c.values_compared && c.first_diff_element) {
      std::printf("             %llu values differ, the first at element %llu; max abs difference %.6g", static_cast<unsigned long long>(c.differing_elements),
                  static_cast<unsigned long long>(*c.first_diff_element), c.max_abs_diff);
      if (c.nonfinite_mismatches) std::printf(", %llu where a value is NaN or infinite", static_cast<unsigned long long>(c.nonfinite_mismatches));
      std::printf("\n");
    } else if (c.values_compared && !c.bytes_compared) {
      std::printf("             same values\n");
    }
    if (!c.bytes_compared && !c.values_compared) std::printf("             contents not compared (different sizes)\n");
  }
  if (r.manifests_compared) {
    std::printf("manifests: %zu differences\n", r.manifest.size());
    for (const auto& m : r.manifest) std::printf("  %s: %s vs %s\n", m.path.c_str(), brief(m.a).c_str(), brief(m.b).c_str());
  }
  for (const auto& f : r.files_only_in_a) std::printf("file only in A  %s\n", f.c_str());
  for (const auto& f : r.files_only_in_b) std::printf("file only in B  %s\n", f.c_str());
  for (const auto& f : r.files_different)
    std::printf("file differs    %s (%llu vs %llu bytes), first at byte %llu\n", f.name.c_str(), static_cast<unsigned long long>(f.a_bytes),
                static_cast<unsigned long long>(f.b_bytes), static_cast<unsigned long long>(f.first_diff_byte));
  std::printf("%s\n", r.identical() ? "identical" : "different");
}

int run_diff(const DiffCliOptions& o) {
  // One after the other, so a miss is reported for A before B.
  const std::string a = ckpt::locate_checkpoint(o.a).path;
  const std::string b = ckpt::locate_checkpoint(o.b).path;
  const artifact::DiffReport r = artifact::diff(a, b);
  if (o.json) std::cout << safe_json_text(report::diff_json(r)) << std::endl;
  else print_text(r);
  return r.identical() ? 0 : static_cast<int>(ErrorKind::verify_failed);
}

CommandRegistration reg(55, [](CLI::App& app) {
  auto opts = std::make_shared<DiffCliOptions>();
  auto* sub = app.add_subcommand("diff", "Compare two artifacts or checkpoints tensor by tensor (and two artifacts' manifests); exit 5 when they differ");
  sub->add_option("A", opts->a, "Artifact directory, checkpoint directory, .safetensors file or model id in the Hugging Face cache")->required();
  sub->add_option("B", opts->b, "Artifact directory, checkpoint directory, .safetensors file or model id in the Hugging Face cache")->required();
  sub->add_flag("--json", opts->json, "Print one JSON object (shape in moepack-diff(1))");
  sub->callback([opts] {
    global_flags().json = opts->json;
    set_exit_code(run_diff(*opts));
  });
});

}  // namespace
}  // namespace moepack::cli
