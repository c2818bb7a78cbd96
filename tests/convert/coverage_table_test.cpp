// The coverage table: every converting path — (method class, backend, experts class) and the
// layout of each tensor it writes — that `convert` produces for a shipped sample on any target
// at TP 1 or 2 (and, for the GPTQ and AutoAWQ samples, with --quantization moe_wna16), and for
// each tensor the upstream golden that proves its bytes:
//   layer   a whole-layer golden (tests/packers/golden/golden_*.safetensors "golden_layer_cases",
//           made by running vLLM's own method classes): a case whose conversion has the same
//           method class, backend, experts class and, for that role, the same layout, and which
//           recorded that role;
//   layout  a packer golden ("golden_cases": upstream's layout function alone) of the same id;
//   none    neither: tests/convert/golden/coverage_reasons.txt must say why (by layout id, or by
//           the id's name before its parameters).
// The table is generated here from the code (plans only, nothing executed) and pinned in
// tests/convert/golden/coverage.txt; a new converting path shows up as a diff, and one with an
// unproven tensor and no reason fails:
//   MOEPACK_UPDATE_GOLDEN=1 build/tests/test_convert --gtest_filter='CoverageTable*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "formats/checkpoints/checkpoint.h"
#include "lib/convert/plan.h"
#include "lib/core/error.h"
#include "lib/oracle/device.h"
#include "support/golden_layers.h"
#include "support/test_support.h"
#include "support/upstream_goldens.h"

namespace moepack::convert {
namespace {
namespace fs = std::filesystem;

fs::path golden_dir() { return fs::path(test::source_dir()) / test::golden::kUpstreamGoldenDir; }
fs::path table_file() { return fs::path(test::source_dir()) / "tests/convert/golden/coverage.txt"; }
fs::path reasons_file() { return fs::path(test::source_dir()) / "tests/convert/golden/coverage_reasons.txt"; }

// A deployment as the golden scripts and every_target.txt name them.
struct Deployment {
  std::string target, moe_backend, model_dtype, quantization;
  int tp = 1;
  bool ep = false;
  std::vector<std::string> env;
};

oracle::Deployment oracle_deployment(const Deployment& d) {
  oracle::Deployment dep = oracle::default_deployment(oracle::parse_target(d.target));
  if (!d.moe_backend.empty()) dep.moe_backend = oracle::normalize_moe_backend(d.moe_backend);
  if (d.model_dtype == "float16") dep.model_dtype = oracle::FloatType::float16;
  if (!d.quantization.empty()) dep.quantization = d.quantization;
  for (const std::string& kv : d.env) dep.env.set(kv.substr(0, kv.find('=')), kv.substr(kv.find('=') + 1));
  dep.parallel.tp = d.tp;
  dep.parallel.enable_expert_parallel = d.ep;
  return dep;
}

// One layer's converting path: "METHOD BACKEND EXPERTS" and role -> layout of rank 0.
struct Path {
  std::string key;
  std::map<std::string, std::string> layouts;
};

// The paths a deployment converts, or none when convert refuses it.
std::vector<Path> converting_paths(const std::string& checkpoint_dir, const Deployment& d) {
  std::vector<Path> out;
  try {
    ckpt::Checkpoint ck = ckpt::open_checkpoint(checkpoint_dir);
    const auto decisions = decide_layers(ck, oracle_deployment(d));
    const ConversionPlan plan = build_conversion_plan(ck, decisions, ConvertRequest{});
    for (size_t i = 0; i < plan.layers.size(); ++i) {
      Path p;
      const oracle::Decision& dec = decisions[i].decision;
      p.key = dec.method_class + " " + dec.backend.value_or("?") + " " + dec.experts_class.value_or("?");
      for (const auto& t : plan.layers[i].ranks.at(0).tensors) p.layouts[t.role] = t.layout;
      out.push_back(std::move(p));
    }
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::refused) throw;
  }
  return out;
}

struct Proofs {
  std::map<std::string, std::string> layer;  // "KEY|ROLE|LAYOUT" -> "file:case" (the first)
  std::map<std::string, std::string> layout;  // layout id -> file
};

void add_layer_goldens(Proofs& proofs, const std::string& file) {
  const nlohmann::json cases = test::golden::golden_metadata((golden_dir() / file).string(), "golden_layer_cases");
  if (cases.is_null()) return;
  const st::File golden((golden_dir() / file).string());
  for (const auto& j : cases) {
    if (j.contains("raises")) continue;  // a deployment vLLM refuses proves no bytes (its refusal is checked by the case itself)
    Deployment d{j.at("target"), j.value("moe_backend", ""), j.value("model_dtype", ""), j.value("quantization", ""), j.at("tp"), j.value("ep", false), {}};
    if (j.contains("env")) d.env = j.at("env").get<std::vector<std::string>>();
    test::TempDir dir;
    const std::string checkpoint = j.value("checkpoint", "");
    const std::string sample = j.value("sample", "");
    const std::string ckpt_dir = checkpoint.empty() ? test::source_dir() + "/samples/" + sample
                                                    : test::golden::write_checkpoint("", checkpoint, golden, dir.path());
    std::set<std::string> recorded;
    for (const auto& o : j.at("ranks").at(0).at("outputs")) recorded.insert(o.at("role").get<std::string>());
    for (const Path& p : converting_paths(ckpt_dir, d))
      for (const auto& [role, layout] : p.layouts)
        if (recorded.count(role)) proofs.layer.emplace(p.key + "|" + role + "|" + layout, file + ":" + j.at("name").get<std::string>());
  }
}

void add_layout_goldens(Proofs& proofs, const std::string& file) {
  const nlohmann::json cases = test::golden::golden_metadata((golden_dir() / file).string(), "golden_cases");
  if (cases.is_null()) return;
  for (const auto& j : cases) proofs.layout.emplace(j.at("layout").get<std::string>(), file);
}

// Layout id (or its name before "(") -> why no golden proves it.
std::map<std::string, std::string> read_reasons() {
  std::map<std::string, std::string> reasons;
  std::ifstream in(reasons_file());
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    if (tab != std::string::npos) reasons[line.substr(0, tab)] = line.substr(tab + 1);
  }
  return reasons;
}

std::string reason_for(const std::map<std::string, std::string>& reasons, const std::string& layout) {
  // A pipeline "A | B" is unproven as a whole; its own entry, else its first stage's name.
  if (auto it = reasons.find(layout); it != reasons.end()) return it->second;
  const std::string name = layout.substr(0, layout.find('('));
  if (auto it = reasons.find(name); it != reasons.end()) return it->second;
  return "";
}

TEST(CoverageTable, EveryConvertingPathHasItsProofOrTheReasonNoneExists) {
  // Every converting deployment's paths, with the first deployment that reaches each.
  std::map<std::string, std::pair<Path, std::string>> paths;  // "KEY|layouts" -> (path, first deployment)
  std::vector<std::string> samples;
  for (const auto& entry : fs::directory_iterator(fs::path(test::source_dir()) / "samples"))
    if (entry.is_directory()) samples.push_back(entry.path().filename().string());
  std::sort(samples.begin(), samples.end());
  for (const std::string& name : samples) {
    const std::string dir = test::source_dir() + "/samples/" + name;
    const ckpt::Checkpoint ck = ckpt::open_checkpoint(dir);
    const bool gptq_or_awq = ck.family == ckpt::Family::gptq || ck.family == ckpt::Family::awq;
    for (const std::string& target : oracle::known_target_names()) {
      if (target == "host") continue;
      for (int tp : {1, 2})
        for (const std::string quantization : {"", "moe_wna16"}) {
          if (!quantization.empty() && !gptq_or_awq) continue;
          const Deployment d{target, "", "", quantization, tp, false, {}};
          for (const Path& p : converting_paths(dir, d)) {
            std::string id = p.key;
            for (const auto& [role, layout] : p.layouts) id += "|" + role + "=" + layout;
            paths.emplace(id, std::make_pair(p, name + " " + target + " tp" + std::to_string(tp) + (quantization.empty() ? "" : " --quantization " + quantization)));
          }
        }
    }
  }

  // Every golden file of the table, in its order: a tensor is credited to the first that proves it.
  Proofs proofs;
  for (const test::golden::UpstreamGolden& golden : test::golden::kUpstreamGoldens)
    if (golden.layer_cases != test::golden::LayerCases::none) add_layer_goldens(proofs, std::string(golden.file));
  for (const test::golden::UpstreamGolden& golden : test::golden::kUpstreamGoldens)
    if (golden.layout_cases) add_layout_goldens(proofs, std::string(golden.file));
  const auto reasons = read_reasons();

  std::ostringstream table;
  size_t tensors = 0, by_layer = 0, by_layout = 0, by_neither = 0, fully_proven = 0;
  std::vector<std::string> missing_reasons;
  for (const auto& [id, entry] : paths) {
    const auto& [path, first] = entry;
    std::ostringstream lines;
    size_t unproven = 0;
    for (const auto& [role, layout] : path.layouts) {
      ++tensors;
      lines << "  " << role << " " << layout << " <- ";
      if (auto it = proofs.layer.find(path.key + "|" + role + "|" + layout); it != proofs.layer.end()) {
        ++by_layer;
        lines << "layer golden " << it->second << "\n";
      } else if (auto lt = proofs.layout.find(layout); lt != proofs.layout.end()) {
        ++by_layout;
        lines << "layout golden " << lt->second << "\n";
      } else {
        ++by_neither;
        ++unproven;
        const std::string why = reason_for(reasons, layout);
        if (why.empty()) missing_reasons.push_back(path.key + " " + role + " " + layout + " (first: " + first + ")");
        lines << "none: " << (why.empty() ? "NO REASON GIVEN" : why) << "\n";
      }
    }
    if (unproven == 0) ++fully_proven;
    table << path.key << " (first: " << first << ")\n" << lines.str();
  }
  std::ostringstream head;
  head << "# Generated by tests/convert/coverage_table_test.cpp; do not edit (reasons: coverage_reasons.txt).\n"
       << "# " << paths.size() << " converting paths, " << fully_proven << " with every tensor proven; " << tensors << " tensors: " << by_layer
       << " by layer goldens, " << by_layout << " by layout goldens, " << by_neither << " by neither.\n";
  const std::string actual = head.str() + table.str();
  RecordProperty("paths", static_cast<int>(paths.size()));
  RecordProperty("tensors_by_layer_golden", static_cast<int>(by_layer));
  RecordProperty("tensors_by_layout_golden", static_cast<int>(by_layout));
  RecordProperty("tensors_unproven", static_cast<int>(by_neither));

  if (const char* update = std::getenv("MOEPACK_UPDATE_GOLDEN"); update && std::string(update) == "1") {
    std::ofstream(table_file()) << actual;
  } else {
    std::ifstream in(table_file());
    std::stringstream expected;
    expected << in.rdbuf();
    EXPECT_EQ(actual, expected.str()) << "(if the change is intended: MOEPACK_UPDATE_GOLDEN=1, then review git diff " << table_file().string() << ")";
  }
  std::string all;
  for (const auto& m : missing_reasons) all += "  " + m + "\n";
  EXPECT_TRUE(missing_reasons.empty()) << missing_reasons.size() << " unproven tensors have no reason in " << reasons_file().string() << ":\n" << all;
  EXPECT_GT(by_layer, 0u);
}

}  // namespace
}  // namespace moepack::convert
