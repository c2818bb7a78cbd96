// Layer cases made by running upstream's process_weights_after_loading (tests/golden/make_*_goldens.py):
// reading them from a golden safetensors file, converting the same checkpoint with moepack's plan
// and executor for the same deployment, and comparing every tensor vLLM holds with the artifact's.
// nvfp4_golden_test.cpp and fp8_golden_test.cpp use the whole of it (LayerCase, check_layer_case);
// wna16_golden_test.cpp and cpu_golden_test.cpp, whose files describe their cases differently
// (synthetic checkpoints stored in the file, partial cases, empty parameters), use the pieces:
// write_checkpoint, convert_for, check_output.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "formats/artifact/manifest.h"
#include "formats/checkpoints/checkpoint.h"
#include "formats/safetensors/file.h"
#include "lib/convert/executor.h"
#include "lib/convert/plan.h"
#include "lib/convert/target.h"
#include "support/sha256.h"
#include "support/test_support.h"

namespace moepack::test::golden {

struct Output {
  std::string role, key, sha256, dtype, note;
  std::vector<uint64_t> shape;
  uint64_t bytes = 0;
};

struct LayerCase {
  std::string name, sample, target, moe_backend, model_dtype, backend;
  std::map<std::string, std::string> sample_sha256;  // checkpoint file -> SHA-256 ("" key: model.safetensors)
  std::vector<std::string> env;                      // NAME=VALUE
  int tp = 1;
  bool ep = false;
  std::map<std::string, std::string> patches;  // checkpoint tensor -> golden tensor holding its new bytes
  std::vector<std::vector<Output>> ranks;      // per rank, what vLLM holds
};

inline void PrintTo(const LayerCase& c, std::ostream* os) { *os << c.name; }

// One rank's "outputs" array of a case: what vLLM holds, as the scripts record it.
inline std::vector<Output> outputs_from_json(const nlohmann::json& outputs) {
  std::vector<Output> out;
  for (const auto& o : outputs) {
    Output x;
    x.role = o.at("role");
    x.key = o.value("key", "");
    x.sha256 = o.value("sha256", "");
    x.dtype = o.at("dtype");
    x.note = o.value("note", "");
    x.shape = o.at("shape").get<std::vector<uint64_t>>();
    x.bytes = o.at("bytes");
    out.push_back(std::move(x));
  }
  return out;
}

// The JSON a golden file's metadata holds under `key`; null when the file or the key is missing
// (a test on the file itself reports that; the parameterized tests then have no cases).
inline nlohmann::json golden_metadata(const std::string& golden_file, const std::string& key) {
  try {
    const st::File file(golden_file);
    const auto& meta = file.header().metadata;
    const auto it = meta.find(key);
    return it == meta.end() ? nlohmann::json() : nlohmann::json::parse(it->second);
  } catch (const std::exception&) {
    return nlohmann::json();
  }
}

// The cases of `golden_file` ("golden_layer_cases" and "golden_patch_sets" in its metadata);
// empty when the file or the keys are missing (a test on the file itself reports that).
inline std::vector<LayerCase> load_layer_cases(const std::string& golden_file) {
  std::vector<LayerCase> cases;
  const nlohmann::json layer_cases = golden_metadata(golden_file, "golden_layer_cases");
  const nlohmann::json patch_sets = golden_metadata(golden_file, "golden_patch_sets");
  if (layer_cases.is_null() || patch_sets.is_null()) return cases;
  for (const auto& j : layer_cases) {
    LayerCase c;
    c.name = j.at("name");
    c.sample = j.at("sample");
    const auto& sha = j.at("sample_sha256");
    if (sha.is_string())
      c.sample_sha256["model.safetensors"] = sha.get<std::string>();
    else
      c.sample_sha256 = sha.get<std::map<std::string, std::string>>();
    c.target = j.at("target");
    c.moe_backend = j.at("moe_backend");
    c.model_dtype = j.at("model_dtype");
    c.backend = j.at("backend");
    c.tp = j.at("tp");
    c.ep = j.at("ep");
    if (j.contains("env")) c.env = j.at("env").get<std::vector<std::string>>();
    if (const std::string set = j.at("patch"); !set.empty())
      c.patches = patch_sets.at(c.sample + "/" + set).get<std::map<std::string, std::string>>();
    for (const auto& r : j.at("ranks")) {
      if (r.at("rank").get<size_t>() != c.ranks.size()) throw std::runtime_error(c.name + ": ranks out of order");
      c.ranks.push_back(outputs_from_json(r.at("outputs")));
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

inline std::string safetensors_dtype(const std::string& torch_name) {
  static const std::map<std::string, std::string> map = {
      {"uint8", "U8"},     {"int8", "I8"},     {"int32", "I32"},           {"int64", "I64"},
      {"float32", "F32"},  {"bfloat16", "BF16"}, {"float16", "F16"},       {"float8_e4m3fn", "F8_E4M3"},
      {"float8_e8m0fnu", "F8_E8M0"}, {"float8_e4m3fnuz", "F8_E4M3FNUZ"}};
  const auto it = map.find(torch_name);
  return it == map.end() ? "unknown torch dtype " + torch_name : it->second;
}

inline std::string first_mismatch(std::span<const uint8_t> got, std::span<const uint8_t> want) {
  if (got.size() != want.size()) return "sizes differ: moepack " + std::to_string(got.size()) + ", upstream " + std::to_string(want.size());
  uint64_t count = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i] && count++ == 0) first = i;
  if (count == 0) return "equal";
  std::ostringstream s;
  s << count << " of " << want.size() << " bytes differ; first at byte " << first << ": moepack 0x" << std::hex << int{got[first]}
    << ", upstream 0x" << int{want[first]};
  return s.str();
}

// Overwrites the bytes of `tensor` in whichever safetensors file of `dir` holds it (same size).
inline void patch_tensor(const std::string& dir, const std::string& tensor, std::span<const uint8_t> bytes) {
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".safetensors") continue;
    const std::string file = entry.path().string();
    uint64_t begin = 0;
    {
      const st::File f(file);
      const st::TensorInfo* t = f.find(tensor);
      if (t == nullptr) continue;
      ASSERT_EQ(t->num_bytes(), bytes.size()) << tensor;
      begin = t->begin;
    }
    std::vector<uint8_t> data = read_file(file);
    uint64_t header = 0;
    std::memcpy(&header, data.data(), 8);
    std::copy(bytes.begin(), bytes.end(), data.begin() + static_cast<std::ptrdiff_t>(8 + header + begin));
    write_file(file, data);
    return;
  }
  ADD_FAILURE() << "no safetensors file of " << dir << " holds " << tensor;
}

// "sm100_auto" and the like: readable test names (of any case type with a `name`).
template <class Case>
std::string case_name(const Case& c) {
  std::string name = c.name;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

// One tensor vLLM holds against the artifact's tensor of that role (in the artifact directory
// `out`): dtype, shape and bytes, whole where the golden stores them, by SHA-256 otherwise.
inline void check_output(const std::string& out, const st::File& golden, const std::map<std::string, artifact::PackedTensor>& tensors,
                         const Output& o) {
  SCOPED_TRACE(o.role + (o.note.empty() ? "" : " (" + o.note + ")"));
  const auto it = tensors.find(o.role);
  if (it == tensors.end()) {
    ADD_FAILURE() << "vLLM holds " << o.role << " after process_weights_after_loading; the artifact has no such tensor";
    return;
  }
  const artifact::PackedTensor& t = it->second;
  const st::File f((std::filesystem::path(out) / t.file).string());
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
    EXPECT_EQ(sha256_hex(got), o.sha256) << "the bytes differ from upstream's (the golden keeps their SHA-256 only)";
  }
}

// One rank's tensors against what vLLM holds on that rank.
inline void check_rank(const std::string& out, const st::File& golden, const std::map<std::string, artifact::PackedTensor>& tensors,
                       const std::vector<Output>& outputs) {
  for (const Output& o : outputs) check_output(out, golden, tensors, o);

  // What the artifact has beyond vLLM's parameters (kernel scalars vLLM keeps on the experts
  // object, or tensors upstream did not produce here), for the record.
  std::string extra;
  for (const auto& entry : tensors) {
    const std::string& role = entry.first;
    if (std::none_of(outputs.begin(), outputs.end(), [&](const Output& o) { return o.role == role; })) extra += " " + role;
  }
  if (!extra.empty()) ::testing::Test::RecordProperty("not_compared", extra);
}

// The deployment a case was made for, as moepack's oracle takes it.
struct Deploy {
  std::string target, moe_backend, model_dtype;  // moe_backend "" = auto; model_dtype "float16" or the default bf16
  int tp = 1;
  bool ep = false;
  std::vector<std::string> env;  // NAME=VALUE
  std::string quantization;      // vLLM --quantization ("" = the checkpoint's own)
};

// Converts `ckpt_dir` with moepack's plan and executor for `deploy` into `out` (created).
inline artifact::Manifest convert_for(const std::string& ckpt_dir, const Deploy& deploy, const std::string& out) {
  oracle::Deployment d = oracle::default_deployment(oracle::parse_target(deploy.target));
  if (!deploy.moe_backend.empty()) d.moe_backend = oracle::normalize_moe_backend(deploy.moe_backend);
  if (deploy.model_dtype == "float16") d.model_dtype = oracle::FloatType::float16;
  for (const std::string& kv : deploy.env) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos) throw std::runtime_error("golden case env entry without '=': " + kv);
    d.env.set(kv.substr(0, eq), kv.substr(eq + 1));
  }
  if (!deploy.quantization.empty()) d.quantization = deploy.quantization;
  d.parallel.tp = deploy.tp;
  d.parallel.enable_expert_parallel = deploy.ep;
  ckpt::Checkpoint ck = ckpt::open_checkpoint(ckpt_dir);
  convert::ConvertRequest req;
  req.target_json = convert::target_json(d);
  convert::ConversionPlan plan = convert::build_conversion_plan(ck, convert::decide_layers(ck, d), req);
  std::filesystem::create_directories(out);
  return convert::execute_plan(plan, out, convert::ExecutorOptions{});
}

// The checkpoint of a case under `dir`/ckpt: samples/`sample` copied, or (sample empty) the
// synthetic checkpoint `checkpoint` the golden file stores ("golden_checkpoints": its
// model.safetensors bytes under a tensor key, its config.json text).
inline std::string write_checkpoint(const std::string& sample, const std::string& checkpoint, const st::File& golden, const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string ckpt_dir = dir + "/ckpt";
  if (!sample.empty()) {
    fs::copy(source_dir() + "/samples/" + sample, ckpt_dir, fs::copy_options::recursive);
    return ckpt_dir;
  }
  const auto entry = nlohmann::json::parse(golden.header().metadata.at("golden_checkpoints")).at(checkpoint);
  const st::TensorInfo* model = golden.find(entry.at("model").get<std::string>());
  if (model == nullptr) throw std::runtime_error(checkpoint + ": the golden file lacks the checkpoint bytes");
  const std::span<const uint8_t> bytes = golden.data(*model);
  fs::create_directories(ckpt_dir);
  write_file(ckpt_dir + "/model.safetensors", std::vector<uint8_t>(bytes.begin(), bytes.end()));
  write_text(ckpt_dir + "/config.json", entry.at("config").get<std::string>());
  return ckpt_dir;
}

// The SHA-256 the scripts record for a checkpoint: of model.safetensors, or, for a sharded one,
// of its shards' SHA-256 hex digests concatenated in file-name order.
inline std::string checkpoint_sha256(const std::string& dir) {
  std::vector<std::string> shards;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().extension() == ".safetensors") shards.push_back(entry.path().filename().string());
  std::sort(shards.begin(), shards.end());
  if (shards.size() == 1 && shards[0] == "model.safetensors") return sha256_hex(read_file(dir + "/model.safetensors"));
  std::string digests;
  for (const std::string& s : shards) digests += sha256_hex(read_file(dir + "/" + s));
  return sha256_hex(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(digests.data()), digests.size()));
}

// Converts the case's checkpoint (patched) with moepack for its deployment and compares every rank.
inline void check_layer_case(const LayerCase& c, const std::string& golden_file, const std::string& script) {
  namespace fs = std::filesystem;
  const st::File golden(golden_file);
  const std::string sample = source_dir() + "/samples/" + c.sample;
  for (const auto& [file, sha] : c.sample_sha256)
    ASSERT_EQ(sha256_hex(read_file(sample + "/" + file)), sha)
        << "samples/" << c.sample << "/" << file << " changed since the goldens were made: rerun " << script;

  TempDir dir;
  const std::string ckpt_dir = dir.path() + "/" + c.sample;
  fs::copy(sample, ckpt_dir, fs::copy_options::recursive);
  for (const auto& [tensor, key] : c.patches) {
    const st::TensorInfo* t = golden.find(key);
    ASSERT_NE(t, nullptr) << key;
    patch_tensor(ckpt_dir, tensor, golden.data(*t));
  }

  const std::string out = dir.path() + "/out";
  const artifact::Manifest m = convert_for(ckpt_dir, Deploy{c.target, c.moe_backend, c.model_dtype, c.tp, c.ep, c.env, ""}, out);
  ASSERT_EQ(m.layers.size(), 1u);
  ASSERT_EQ(m.layers[0].backend, c.backend);
  ASSERT_EQ(m.layers[0].ranks.size(), c.ranks.size());
  for (size_t rank = 0; rank < c.ranks.size(); ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    ASSERT_EQ(m.layers[0].ranks[rank].rank, static_cast<int>(rank));
    check_rank(out, golden, m.layers[0].ranks[rank].tensors, c.ranks[rank]);
  }
}

}  // namespace moepack::test::golden
