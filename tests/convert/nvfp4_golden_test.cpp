// NVFP4 conversions against bytes produced by the REAL upstream Python code, end to end.
//
// tests/golden/make_nvfp4_goldens.py loaded the repository's NVFP4 samples (some with seeded
// adversarial scales patched in) into one layer per rank (TP 1 or 2, EP 2) as vLLM e9d1398d9
// allocates and loads it, and ran
// the quantization method's own process_weights_after_loading (ModelOptNvFp4FusedMoE or
// CompressedTensorsW4A4Nvfp4MoEMethod) for one NVFP4 backend: convert_to_nvfp4_moe_kernel_format
// with every helper it calls (FlashInfer 0.6.17's pure-Python shuffles), make_nvfp4_moe_quant_config
// and the experts class's own process_weights_after_loading (input-scale folds, g1_scale_c, the
// SwiGLU clamp fold, the b12x bake-in). tests/packers/golden/README.md says how, on what, and
// what was stood in for.
//
// For each such case ("golden_layer_cases" in golden_nvfp4.safetensors) this test converts the
// same checkpoint with moepack for the same deployment and checks that the oracle picks the
// same backend and that every tensor vLLM's kernels then read is in the artifact, under its role
// and rank, with vLLM's dtype, shape and bytes: compared whole where the golden stores them (scalars and the
// block scales whose values vLLM rewrites) and by SHA-256 of the bytes otherwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "formats/artifact/manifest.h"
#include "formats/checkpoints/checkpoint.h"
#include "formats/safetensors/file.h"
#include "lib/convert/executor.h"
#include "lib/convert/plan.h"
#include "support/sha256.h"
#include "support/test_support.h"

namespace moepack::convert {
namespace {
namespace fs = std::filesystem;

std::string golden_file() { return test::source_dir() + "/tests/packers/golden/golden_nvfp4.safetensors"; }

struct Output {
  std::string role, key, sha256, dtype, note;
  std::vector<uint64_t> shape;
  uint64_t bytes = 0;
};

struct LayerCase {
  std::string name, sample, sample_sha256, target, moe_backend, model_dtype, backend;
  int tp = 1;
  bool ep = false;
  std::map<std::string, std::string> patches;  // checkpoint tensor -> golden tensor holding its new bytes
  std::vector<std::vector<Output>> ranks;       // per rank, what vLLM holds
};

void PrintTo(const LayerCase& c, std::ostream* os) { *os << c.name; }

std::vector<LayerCase> load_cases() {
  std::vector<LayerCase> cases;
  std::unique_ptr<st::File> file;
  try {
    file = std::make_unique<st::File>(golden_file());
  } catch (const std::exception&) {
    return cases;  // Nvfp4GoldenFile.HasLayerCases reports it
  }
  const auto& meta = file->header().metadata;
  const auto it = meta.find("golden_layer_cases");
  const auto sets_it = meta.find("golden_patch_sets");
  if (it == meta.end() || sets_it == meta.end()) return cases;
  const auto patch_sets = nlohmann::json::parse(sets_it->second);
  for (const auto& j : nlohmann::json::parse(it->second)) {
    LayerCase c;
    c.name = j.at("name");
    c.sample = j.at("sample");
    c.sample_sha256 = j.at("sample_sha256");
    c.target = j.at("target");
    c.moe_backend = j.at("moe_backend");
    c.model_dtype = j.at("model_dtype");
    c.backend = j.at("backend");
    c.tp = j.at("tp");
    c.ep = j.at("ep");
    if (const std::string set = j.at("patch"); !set.empty())
      c.patches = patch_sets.at(c.sample + "/" + set).get<std::map<std::string, std::string>>();
    for (const auto& r : j.at("ranks")) {
      if (r.at("rank").get<size_t>() != c.ranks.size()) throw std::runtime_error(c.name + ": ranks out of order");
      std::vector<Output> outputs;
      for (const auto& o : r.at("outputs")) {
        Output out;
        out.role = o.at("role");
        out.key = o.value("key", "");
        out.sha256 = o.value("sha256", "");
        out.dtype = o.at("dtype");
        out.note = o.value("note", "");
        out.shape = o.at("shape").get<std::vector<uint64_t>>();
        out.bytes = o.at("bytes");
        outputs.push_back(std::move(out));
      }
      c.ranks.push_back(std::move(outputs));
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

const std::vector<LayerCase>& all_cases() {
  static const std::vector<LayerCase> cases = load_cases();
  return cases;
}

std::string safetensors_dtype(const std::string& torch_name) {
  static const std::map<std::string, std::string> map = {{"uint8", "U8"},   {"int32", "I32"},   {"float32", "F32"},
                                                         {"bfloat16", "BF16"}, {"float16", "F16"}, {"float8_e4m3fn", "F8_E4M3"}};
  const auto it = map.find(torch_name);
  return it == map.end() ? "unknown torch dtype " + torch_name : it->second;
}

std::string first_mismatch(std::span<const uint8_t> got, std::span<const uint8_t> want) {
  if (got.size() != want.size()) return "sizes differ: moepack " + std::to_string(got.size()) + ", upstream " + std::to_string(want.size());
  uint64_t count = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i] && count++ == 0) first = i;
  std::ostringstream s;
  s << count << " of " << want.size() << " bytes differ; first at byte " << first << ": moepack 0x" << std::hex << int{got[first]}
    << ", upstream 0x" << int{want[first]};
  return s.str();
}

// Overwrites the bytes of `tensor` in `file` with `bytes` (the same dtype and size).
void patch_tensor(const std::string& file, const std::string& tensor, std::span<const uint8_t> bytes) {
  uint64_t begin = 0;
  {
    const st::File f(file);
    const st::TensorInfo* t = f.find(tensor);
    ASSERT_NE(t, nullptr) << tensor;
    ASSERT_EQ(t->num_bytes(), bytes.size()) << tensor;
    begin = t->begin;
  }
  std::vector<uint8_t> data = test::read_file(file);
  uint64_t header = 0;
  std::memcpy(&header, data.data(), 8);
  std::copy(bytes.begin(), bytes.end(), data.begin() + static_cast<std::ptrdiff_t>(8 + header + begin));
  test::write_file(file, data);
}

// "sm100_auto" and the like: readable test names.
std::string case_name(const LayerCase& c) {
  std::string name = c.name;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

// One rank's tensors against what vLLM holds on that rank.
void check_rank(const std::string& out, const st::File& golden, const std::map<std::string, artifact::PackedTensor>& tensors,
                const std::vector<Output>& outputs) {
  for (const Output& o : outputs) {
    SCOPED_TRACE(o.role + (o.note.empty() ? "" : " (" + o.note + ")"));
    const auto it = tensors.find(o.role);
    if (it == tensors.end()) {
      ADD_FAILURE() << "vLLM holds " << o.role << " after process_weights_after_loading; the artifact has no such tensor";
      continue;
    }
    const artifact::PackedTensor& t = it->second;
    const st::File f((fs::path(out) / t.file).string());
    const st::TensorInfo* info = f.find(t.name);
    ASSERT_NE(info, nullptr) << t.name;
    const std::span<const uint8_t> got = f.data(*info);
    EXPECT_EQ(t.dtype, safetensors_dtype(o.dtype));
    EXPECT_EQ(t.shape, o.shape);
    ASSERT_EQ(got.size(), o.bytes);
    if (!o.key.empty()) {
      const st::TensorInfo* want = golden.find(o.key);
      ASSERT_NE(want, nullptr) << o.key;
      const std::span<const uint8_t> upstream = golden.data(*want);
      EXPECT_TRUE(std::equal(got.begin(), got.end(), upstream.begin(), upstream.end())) << first_mismatch(got, upstream);
    } else {
      EXPECT_EQ(test::sha256_hex(got), o.sha256) << "the bytes differ from upstream's (the golden keeps their SHA-256 only)";
    }
  }

  // What the artifact has beyond vLLM's parameters (kernel scalars vLLM keeps on the experts
  // object, or tensors upstream did not produce here), for the record.
  std::string extra;
  for (const auto& entry : tensors) {
    const std::string& role = entry.first;
    if (std::none_of(outputs.begin(), outputs.end(), [&](const Output& o) { return o.role == role; })) extra += " " + role;
  }
  if (!extra.empty()) ::testing::Test::RecordProperty("not_compared", extra);
}

class Nvfp4Golden : public ::testing::TestWithParam<LayerCase> {};

TEST_P(Nvfp4Golden, ConvertsToTheBytesUpstreamHolds) {
  const LayerCase& c = GetParam();
  const st::File golden(golden_file());
  const std::string sample = test::source_dir() + "/samples/" + c.sample;
  ASSERT_EQ(test::sha256_hex(test::read_file(sample + "/model.safetensors")), c.sample_sha256)
      << "samples/" << c.sample << " changed since the goldens were made: rerun tests/golden/make_nvfp4_goldens.py";

  test::TempDir dir;
  const std::string ckpt_dir = dir.path() + "/" + c.sample;
  fs::copy(sample, ckpt_dir, fs::copy_options::recursive);
  for (const auto& [tensor, key] : c.patches) {
    const st::TensorInfo* t = golden.find(key);
    ASSERT_NE(t, nullptr) << key;
    patch_tensor(ckpt_dir + "/model.safetensors", tensor, golden.data(*t));
  }

  oracle::Deployment d = oracle::default_deployment(oracle::parse_target(c.target));
  if (!c.moe_backend.empty()) d.moe_backend = oracle::normalize_moe_backend(c.moe_backend);
  if (c.model_dtype == "float16") d.model_dtype = oracle::FloatType::float16;
  d.parallel.tp = c.tp;
  d.parallel.enable_expert_parallel = c.ep;
  ckpt::Checkpoint ck = ckpt::open_checkpoint(ckpt_dir);
  ConversionPlan plan = build_conversion_plan(ck, decide_layers(ck, d), ConvertRequest{});
  const std::string out = dir.path() + "/out";
  fs::create_directories(out);
  const artifact::Manifest m = execute_plan(plan, out, ExecutorOptions{});
  ASSERT_EQ(m.layers.size(), 1u);
  ASSERT_EQ(m.layers[0].backend, c.backend);
  ASSERT_EQ(m.layers[0].ranks.size(), c.ranks.size());
  for (size_t rank = 0; rank < c.ranks.size(); ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    ASSERT_EQ(m.layers[0].ranks[rank].rank, static_cast<int>(rank));
    check_rank(out, golden, m.layers[0].ranks[rank].tensors, c.ranks[rank]);
  }
}

INSTANTIATE_TEST_SUITE_P(UpstreamNvfp4, Nvfp4Golden, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<LayerCase>& info) { return case_name(info.param); });

TEST(Nvfp4GoldenFile, HasLayerCasesForEveryBackendWithItsOwnLayout) {
  const st::File f(golden_file());
  const auto& meta = f.header().metadata;
  ASSERT_TRUE(meta.count("provenance"));
  const auto provenance = nlohmann::json::parse(meta.at("provenance"));
  EXPECT_EQ(provenance.at("vllm"), "e9d1398d9");
  EXPECT_EQ(provenance.at("flashinfer"), "v0.6.17");
  EXPECT_TRUE(provenance.at("compat").empty()) << provenance.dump();  // torch 2.x with float8, not a dry run
  std::map<std::string, int> by_backend;
  for (const LayerCase& c : all_cases()) ++by_backend[c.backend];
  for (const char* b : {"FLASHINFER_TRTLLM", "FLASHINFER_CUTLASS", "VLLM_CUTLASS", "MARLIN", "FLASHINFER_CUTEDSL", "FLASHINFER_B12X", "EMULATION"})
    EXPECT_GT(by_backend[b], 0) << b << " has no golden layer case";
}

}  // namespace
}  // namespace moepack::convert
