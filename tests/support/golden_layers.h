// Layer cases made by running upstream's process_weights_after_loading (tests/golden/make_*_goldens.py;
// the files and their rows: support/upstream_goldens.h): reading them from a golden safetensors
// file, converting the same checkpoint with moepack's plan and executor for the same deployment,
// and comparing every tensor vLLM holds with the artifact's. The files describe a case's
// checkpoint in one of two ways: a repository sample by the SHA-256 of each of its files, with
// tensors the golden file holds patched in ("sample_sha256", "patch"), or a sample or a synthetic
// checkpoint stored in the golden file by the SHA-256 checkpoint_sha256 computes
// ("checkpoint", "sha256").
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
#include <string_view>
#include <vector>

#include "formats/artifact/manifest.h"
#include "formats/checkpoints/checkpoint.h"
#include "formats/safetensors/file.h"
#include "lib/convert/executor.h"
#include "lib/convert/plan.h"
#include "lib/convert/target.h"
#include "support/sha256.h"
#include "support/test_support.h"
#include "support/upstream_goldens.h"

namespace moepack::test::golden {

struct Output {
  std::string role, key, sha256, dtype, note;
  std::vector<uint64_t> shape;
  uint64_t bytes = 0;
};

// What vLLM holds on one rank.
struct RankCase {
  std::vector<Output> outputs;
  std::vector<std::string> empty;  // parameters vLLM holds with no elements (AutoGPTQ's sort indices on CPU)
};

struct LayerCase {
  UpstreamGolden golden;  // the file holding the case
  std::string name, sample, target, moe_backend, model_dtype, backend, method;
  std::string checkpoint;     // a synthetic checkpoint the golden file stores ("" = samples/`sample`)
  std::string experts_class;  // "" where the file does not record it
  std::string quantization;   // --quantization ("" = the checkpoint's own)
  std::map<std::string, std::string> sample_sha256;  // sample file -> SHA-256 (empty: `checkpoint_sha256` instead)
  std::string checkpoint_sha256;                     // of the stored or copied checkpoint, as checkpoint_sha256() computes it
  std::vector<std::string> env;                      // NAME=VALUE
  std::vector<std::string> notes;                    // what upstream's run said about the case
  int tp = 1;
  bool ep = false;
  bool partial = false;                        // only some of the layer's tensors were made by upstream
  std::string upstream_raises;                 // what vLLM raised preparing the layer ("" = it loaded; then no ranks)
  std::map<std::string, std::string> patches;  // checkpoint tensor -> golden tensor holding its new bytes
  std::vector<RankCase> ranks;
};

inline void PrintTo(const LayerCase& c, std::ostream* os) { *os << c.golden.file << ":" << c.name; }

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

inline std::string golden_path(const UpstreamGolden& golden) {
  return source_dir() + "/" + std::string(kUpstreamGoldenDir) + "/" + std::string(golden.file);
}

// The layer cases of `golden` ("golden_layer_cases", and "golden_patch_sets" where a case is
// patched); empty when the file or the key is missing (UpstreamGoldens.* reports that).
inline std::vector<LayerCase> load_layer_cases(const UpstreamGolden& golden) {
  std::vector<LayerCase> cases;
  const std::string file = golden_path(golden);
  const nlohmann::json layer_cases = golden_metadata(file, "golden_layer_cases");
  if (layer_cases.is_null()) return cases;
  const nlohmann::json patch_sets = golden_metadata(file, "golden_patch_sets");
  for (const auto& j : layer_cases) {
    LayerCase c;
    c.golden = golden;
    c.name = j.at("name");
    c.sample = j.at("sample");
    c.target = j.at("target");
    c.moe_backend = j.at("moe_backend");
    c.model_dtype = j.at("model_dtype");
    c.backend = j.at("backend");
    c.method = j.value("method", "");
    c.experts_class = j.value("experts_class", "");
    c.quantization = j.value("quantization", "");
    c.tp = j.at("tp");
    c.ep = j.at("ep");
    c.partial = j.value("partial", false);
    c.upstream_raises = j.value("raises", "");
    if (j.contains("env")) c.env = j.at("env").get<std::vector<std::string>>();
    if (j.contains("notes")) c.notes = j.at("notes").get<std::vector<std::string>>();
    if (j.contains("sample_sha256")) {
      const auto& sha = j.at("sample_sha256");
      if (sha.is_string())
        c.sample_sha256["model.safetensors"] = sha.get<std::string>();
      else
        c.sample_sha256 = sha.get<std::map<std::string, std::string>>();
      if (const std::string set = j.at("patch"); !set.empty())
        c.patches = patch_sets.at(c.sample + "/" + set).get<std::map<std::string, std::string>>();
    } else {
      c.checkpoint = j.at("checkpoint");
      c.checkpoint_sha256 = j.at("sha256");
    }
    for (const auto& r : j.at("ranks")) {
      if (r.at("rank").get<size_t>() != c.ranks.size()) throw std::runtime_error(c.name + ": ranks out of order");
      RankCase rank;
      rank.outputs = outputs_from_json(r.at("outputs"));
      if (r.contains("empty")) rank.empty = r.at("empty").get<std::vector<std::string>>();
      c.ranks.push_back(std::move(rank));
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

// "fp8_bf16__mixtral_bf16_sm90_auto" and the like: readable test names, unique across the files
// (two files may name a case alike).
inline std::string case_name(const LayerCase& c) {
  std::string_view stem = c.golden.file;
  stem.remove_prefix(std::string_view("golden_").size());
  stem.remove_suffix(std::string_view(".safetensors").size());
  std::string name = std::string(stem) + "__" + c.name;
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

// One rank's tensors against what vLLM holds on that rank; what else the artifact may hold is the
// golden file's rule (LayerCases).
inline void check_rank(const std::string& out, const st::File& golden, const std::map<std::string, artifact::PackedTensor>& tensors,
                       const RankCase& rank, LayerCases others, bool partial) {
  for (const Output& o : rank.outputs) check_output(out, golden, tensors, o);
  for (const std::string& role : rank.empty) EXPECT_EQ(tensors.count(role), 0u) << role << " is empty in vLLM's layer";

  std::vector<std::string> beyond;
  for (const auto& entry : tensors) {
    const std::string& role = entry.first;
    if (std::none_of(rank.outputs.begin(), rank.outputs.end(), [&](const Output& o) { return o.role == role; })) beyond.push_back(role);
  }
  std::string listed;
  for (const std::string& role : beyond) listed += " " + role;
  if (!listed.empty()) ::testing::Test::RecordProperty("not_compared", listed);
  if (partial) return;
  for (const std::string& role : beyond) {
    if (others == LayerCases::nothing_else_unless_partial) {
      ADD_FAILURE() << "the artifact has " << role << ", which vLLM's layer does not hold after process_weights_after_loading";
    } else if (others == LayerCases::only_weight_shape_unless_partial) {
      EXPECT_NE(role.find("weight_shape"), std::string::npos) << "the artifact has " << role << ", which vLLM's layer does not hold";
    }
  }
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
inline void check_layer_case(const LayerCase& c) {
  namespace fs = std::filesystem;
  for (const std::string& note : c.notes) ::testing::Test::RecordProperty("upstream_note", note);
  const st::File golden(golden_path(c.golden));
  const std::string rerun = "samples/" + c.sample + " changed since the goldens were made: rerun " + std::string(c.golden.generator);
  TempDir dir;
  std::string ckpt_dir;
  if (c.sample_sha256.empty()) {
    ckpt_dir = write_checkpoint(c.sample, c.checkpoint, golden, dir.path());
    ASSERT_EQ(checkpoint_sha256(ckpt_dir), c.checkpoint_sha256) << (c.sample.empty() ? "the stored checkpoint is damaged" : rerun);
  } else {
    const std::string sample = source_dir() + "/samples/" + c.sample;
    for (const auto& [file, sha] : c.sample_sha256) ASSERT_EQ(sha256_hex(read_file(sample + "/" + file)), sha) << file << ": " << rerun;
    ckpt_dir = dir.path() + "/" + c.sample;
    fs::copy(sample, ckpt_dir, fs::copy_options::recursive);
    for (const auto& [tensor, key] : c.patches) {
      const st::TensorInfo* t = golden.find(key);
      ASSERT_NE(t, nullptr) << key;
      patch_tensor(ckpt_dir, tensor, golden.data(*t));
    }
  }

  const std::string out = dir.path() + "/out";
  const Deploy deploy{c.target, c.moe_backend, c.model_dtype, c.tp, c.ep, c.env, c.quantization};
  if (!c.upstream_raises.empty()) {
    // vLLM fails while preparing this layer: moepack must refuse the deployment as a load
    // failure (the plan's LoadFailure), not convert it.
    ASSERT_TRUE(c.ranks.empty()) << "a case vLLM refused holds no ranks";
    try {
      convert_for(ckpt_dir, deploy, out);
      ADD_FAILURE() << "converted a layer vLLM refuses to load (" << c.upstream_raises << ")";
    } catch (const Error& e) {
      // Refusals of layers vLLM cannot load: what its loader raises (the reader knows) or what
      // its preparation raises at this rank's shapes (the plan finds).
      const std::string what = e.what();
      EXPECT_TRUE(what.find("vLLM refuses to load this layer") != std::string::npos || what.find("vLLM fails while loading the layer") != std::string::npos)
          << "refused for another reason than vLLM's (" << c.upstream_raises << "): " << what;
    }
    return;
  }
  const artifact::Manifest m = convert_for(ckpt_dir, deploy, out);
  ASSERT_EQ(m.layers.size(), 1u);
  ASSERT_EQ(m.layers[0].backend, c.backend);
  if (!c.experts_class.empty()) {
    EXPECT_EQ(m.layers[0].experts_class, c.experts_class);
  }
  ASSERT_EQ(m.layers[0].ranks.size(), c.ranks.size());
  for (size_t rank = 0; rank < c.ranks.size(); ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    ASSERT_EQ(m.layers[0].ranks[rank].rank, static_cast<int>(rank));
    check_rank(out, golden, m.layers[0].ranks[rank].tensors, c.ranks[rank], c.golden.layer_cases, c.partial);
  }
}

}  // namespace moepack::test::golden
