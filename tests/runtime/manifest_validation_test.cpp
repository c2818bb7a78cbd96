// A lying manifest must never crash, hang or pass: every field an artifact's reader sizes
// anything from, changed by one step, is refused as bad input (exit 4) naming that field, before
// a tensor is read — by `verify` with and without the source, and by the runtime `run` uses.
// The table is the tampering hunt (issue 20) plus what the validation's rules imply.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "formats/artifact/manifest.h"
#include "formats/checkpoints/checkpoint.h"
#include "lib/runtime/artifact_runtime.h"
#include "lib/convert/executor.h"
#include "lib/convert/plan.h"
#include "lib/convert/target.h"
#include "lib/runtime/verify.h"
#include "lib/core/error.h"
#include "support/test_support.h"

namespace moepack::runtime {
namespace {
using convert::ConvertRequest;
using convert::ExecutorOptions;
using convert::build_conversion_plan;
using convert::decide_layers;
using convert::deployment_from_target_json;
using convert::execute_plan;
using convert::target_json;
namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

std::string sample(const std::string& name) { return test::source_dir() + "/samples/" + name; }

// One artifact per (sample, target, tp), converted once for the whole table.
struct Base {
  std::string sample, target;
  int tp = 1;
  bool ep = false;
  std::string key() const { return sample + "-" + target + "-tp" + std::to_string(tp) + (ep ? "-ep" : ""); }
};

class Artifacts {
 public:
  const std::string& get(const Base& b) {
    auto it = dirs_.find(b.key());
    if (it != dirs_.end()) return it->second;
    const std::string out = root_.file(b.key());
    ckpt::Checkpoint ck = ckpt::open_checkpoint(sample(b.sample));
    oracle::Deployment dep = oracle::default_deployment(oracle::parse_target(b.target));
    dep.parallel.tp = b.tp;
    dep.parallel.enable_expert_parallel = b.ep;
    ConvertRequest req;
    req.target_json = target_json(dep);
    fs::create_directories(out);
    execute_plan(build_conversion_plan(ck, decide_layers(ck, dep), req), out, ExecutorOptions{});
    return dirs_.emplace(b.key(), out).first->second;
  }

 private:
  test::TempDir root_;
  std::map<std::string, std::string> dirs_;
};

Artifacts& artifacts() {
  static Artifacts a;
  return a;
}

// A copy of the artifact (files hard-linked: the table never changes them) with its manifest
// edited.
std::string tampered_copy(const std::string& good, const std::string& dir, const std::function<void(json&)>& edit) {
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(good))
    if (e.path().filename() != "moepack.json") fs::create_hard_link(e.path(), fs::path(dir) / e.path().filename());
  std::ifstream in(good + "/moepack.json");
  json m = json::parse(in);
  edit(m);
  std::ofstream(dir + "/moepack.json") << m.dump(2) << "\n";
  return dir;
}

struct Tamper {
  const char* what;
  Base base;
  std::function<void(json&)> edit;
  const char* field;  // the field the message must name
};

json& layer0(json& m) { return m["layers"][0]; }
json& tensor(json& m, const char* role, int rank = 0) { return m["layers"][0]["ranks"][rank]["tensors"][role]; }

const Base kMxfp4{"gpt-oss-mxfp4", "sm90"};
const Base kNvfp4Tp2{"ct-nvfp4", "sm100", 2};
const Base kBf16Cpu{"qwen3-moe-bf16", "cpu-amx"};
const Base kGptqMarlin{"gptq-int4-desc-act", "sm80"};
const Base kFp8Ep{"deepseek-v3-fp8", "sm90", 2, true};

std::vector<Tamper> table() {
  auto times2 = [](const char* key) { return [key](json& m) { layer0(m)[key] = layer0(m)[key].get<uint64_t>() * 2; }; };
  auto set = [](const char* key, json v) { return [key, v](json& m) { layer0(m)[key] = v; }; };
  return {
      {"hidden_size doubled", kMxfp4, times2("hidden_size"), "$.layers[0].hidden_size"},
      {"hidden and padded hidden doubled", kMxfp4,
       [](json& m) {
         layer0(m)["hidden_size"] = layer0(m)["hidden_size"].get<uint64_t>() * 2;
         layer0(m)["padded_hidden_size"] = layer0(m)["padded_hidden_size"].get<uint64_t>() * 2;
       },
       "$.layers[0]"},
      {"padded intermediate doubled", kNvfp4Tp2, times2("padded_intermediate_size"), "$.layers[0]"},
      {"intermediate above padded", kBf16Cpu, times2("intermediate_size"), "$.layers[0].intermediate_size"},
      {"hidden doubled, BF16 CPU", kBf16Cpu,
       [](json& m) {
         layer0(m)["hidden_size"] = layer0(m)["hidden_size"].get<uint64_t>() * 2;
         layer0(m)["padded_hidden_size"] = layer0(m)["padded_hidden_size"].get<uint64_t>() * 2;
       },
       "$.layers[0]"},
      {"hidden doubled, Marlin act-order", kGptqMarlin,
       [](json& m) {
         layer0(m)["hidden_size"] = layer0(m)["hidden_size"].get<uint64_t>() * 2;
         layer0(m)["padded_hidden_size"] = layer0(m)["padded_hidden_size"].get<uint64_t>() * 2;
       },
       "$.layers[0]"},
      {"one more expert", kMxfp4, [](json& m) { layer0(m)["num_experts"] = layer0(m)["num_experts"].get<uint64_t>() + 1; }, "$.layers[0]."},
      {"one more expert, no groups", kBf16Cpu, [](json& m) { layer0(m)["num_experts"] = layer0(m)["num_experts"].get<uint64_t>() + 1; },
       "$.layers[0].ranks[0].tensors."},
      {"another backend of the family with its class", kMxfp4,
       [](json& m) {
         layer0(m)["backend"] = "MARLIN";
         layer0(m)["experts_class"] = "MarlinExperts";
       },
       "$.layers[0].ranks[0].tensors."},
      {"2^31 experts", kMxfp4, set("num_experts", uint64_t{1} << 31), "$.layers[0].num_experts"},
      {"experts that do not split over EP ranks", kFp8Ep, [](json& m) { layer0(m)["num_experts"] = layer0(m)["num_experts"].get<uint64_t>() + 1; },
       "$.layers[0]."},
      {"EP ranks with fewer experts each", kFp8Ep, [](json& m) { layer0(m)["num_experts"] = layer0(m)["num_experts"].get<uint64_t>() * 2; },
       "$.layers[0].ranks[0].tensors."},
      {"top_k 0", kMxfp4, set("top_k", 0), "$.layers[0].top_k"},
      {"top_k above the experts", kMxfp4, [](json& m) { layer0(m)["top_k"] = layer0(m)["num_experts"].get<uint64_t>() + 1; }, "$.layers[0].top_k"},
      {"backend that does not exist", kMxfp4, set("backend", "NO_SUCH_BACKEND"), "$.layers[0].backend"},
      {"experts class that does not exist", kMxfp4, set("experts_class", "FastestExperts"), "$.layers[0].experts_class"},
      {"family that does not exist", kMxfp4, set("family", "fp3"), "$.layers[0].family"},
      {"weight key that does not exist", kMxfp4, set("weight_key", "kFp3Static"), "$.layers[0].weight_key"},
      {"activation that does not exist", kMxfp4, set("activation", "swishy"), "$.layers[0].activation"},
      {"routing method that does not exist", kMxfp4, [](json& m) { layer0(m)["routing"]["method"] = "Random"; }, "$.layers[0].routing.method"},
      {"a rank too many", kNvfp4Tp2,
       [](json& m) {
         layer0(m)["ranks"].push_back(layer0(m)["ranks"][1]);
         layer0(m)["ranks"][2]["rank"] = 2;
       },
       "$.layers[0].ranks"},
      {"a rank id out of range", kNvfp4Tp2, [](json& m) { layer0(m)["ranks"][1]["rank"] = 7; }, "$.layers[0].ranks[1].rank"},
      {"per-rank scope dropped", kNvfp4Tp2, [](json& m) { layer0(m).erase("intermediate_size_scope"); }, "$.layers[0].intermediate_size_scope"},
      {"shape with one more expert", kMxfp4,
       [](json& m) {
         auto& s = tensor(m, "w13_weight")["shape"];
         s[0] = s[0].get<uint64_t>() + 1;
       },
       "$.layers[0].ranks[0].tensors.w13_weight.shape"},
      {"shape [2^40, 2^40]", kMxfp4,
       [](json& m) {
         tensor(m, "w2_weight")["shape"] = json::array({uint64_t{1} << 40, uint64_t{1} << 40});
       },
       "$.layers[0].ranks[0].tensors.w2_weight.shape"},
      {"dtype F64", kMxfp4, [](json& m) { tensor(m, "w13_weight")["dtype"] = "F64"; }, "$.layers[0].ranks[0].tensors.w13_weight.dtype"},
      {"dtype that is no dtype", kMxfp4, [](json& m) { tensor(m, "w13_weight")["dtype"] = "Q7"; }, "$.layers[0].ranks[0].tensors.w13_weight.dtype"},
      {"layout no packer has", kMxfp4, [](json& m) { tensor(m, "w13_weight")["layout"] = "nobody.Swizzle(v0)"; },
       "$.layers[0].ranks[0].tensors.w13_weight.layout"},
      {"layout of another role", kMxfp4, [](json& m) { tensor(m, "w13_weight")["layout"] = tensor(m, "w13_weight_scale")["layout"]; },
       "$.layers[0].ranks[0].tensors.w13_weight."},
      {"canonical shape changed", kBf16Cpu,
       [](json& m) {
         auto& s = tensor(m, "w2_weight")["canonical"]["shape"];
         s[0] = s[0].get<uint64_t>() * 2;
       },
       "$.layers[0].ranks[0].tensors.w2_weight."},
      {"canonical shape huge", kBf16Cpu,
       [](json& m) {
         tensor(m, "w2_weight")["canonical"]["shape"] = json::array({uint64_t{1} << 40, uint64_t{1} << 30});
       },
       "$.layers[0].ranks[0].tensors.w2_weight.canonical.shape"},
      {"canonical dtype no dtype", kBf16Cpu, [](json& m) { tensor(m, "w2_weight")["canonical"]["dtype"] = "X9"; },
       "$.layers[0].ranks[0].tensors.w2_weight.canonical.dtype"},
      {"tensor name not in its file", kMxfp4, [](json& m) { tensor(m, "w2_weight")["name"] = "model.layers.0.mlp.experts.nothing"; },
       "$.layers[0].ranks[0].tensors.w2_weight.name"},
      {"file the manifest does not list", kMxfp4, [](json& m) { tensor(m, "w2_weight")["file"] = "other.safetensors"; },
       "$.layers[0].ranks[0].tensors.w2_weight.file"},
      {"tensor name swapped with another role's", kMxfp4, [](json& m) { tensor(m, "w2_weight")["name"] = tensor(m, "w13_weight")["name"]; },
       "$.layers[0].ranks[0].tensors.w2_weight."},
      {"reduction layout unknown", kNvfp4Tp2, [](json& m) { tensor(m, "w13_weight_scale_2")["layout"] = "vllm.nothing(e9d1398d9)"; },
       "$.layers[0].ranks[0].tensors.w13_weight_scale_2.layout"},
      {"value stage unknown", kGptqMarlin,
       [](json& m) {
         for (auto& [role, t] : layer0(m)["ranks"][0]["tensors"].items())
           if (t.contains("canonical")) {
             t["canonical"]["value_stage"] = "vllm.nothing()";
             break;
           }
       },
       "value_stage"},
      {"reference of another vLLM", kMxfp4, [](json& m) { m["reference"] = "vllm 0000000 (2025-01-01)"; }, "$.reference"},
      {"target device unknown", kMxfp4, [](json& m) { m["target"]["device"] = "sm99"; }, "$.target.device"},
      {"target tp size disagrees with moe_tp_size", kNvfp4Tp2, [](json& m) { m["target"]["tp_size"] = 4; }, "$.target."},
      {"target tp size 2^40", kMxfp4, [](json& m) { m["target"]["tp_size"] = uint64_t{1} << 40; }, "$.target.tp_size"},
      {"target key unknown", kMxfp4, [](json& m) { m["target"]["speed"] = "fast"; }, "$.target.speed"},
      {"duplicate layer prefix", kMxfp4, [](json& m) { m["layers"].push_back(m["layers"][0]); }, "$.layers[1].prefix"},
  };
}

// The error of `f`, which must be bad input.
std::string bad_input_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::bad_input) << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a moepack error: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

TEST(ManifestValidation, EveryTamperedFieldIsRefusedByNameBeforeAnythingRuns) {
  test::TempDir dir;
  int n = 0;
  for (const Tamper& t : table()) {
    SCOPED_TRACE(std::string(t.what) + " (" + t.base.key() + ")");
    const std::string good = artifacts().get(t.base);
    const std::string bad = tampered_copy(good, dir.file(std::to_string(n++)), t.edit);
    // The runtime (`run`, `bench`), `verify` alone and `verify --source` all refuse it.
    const std::string runtime = bad_input_of([&] { ArtifactRuntime rt(bad); });
    EXPECT_NE(runtime.find(t.field), std::string::npos) << runtime;
    EXPECT_NE(runtime.find("moepack.json"), std::string::npos) << "names the manifest: " << runtime;
    VerifyOptions o;
    o.artifact = bad;
    const std::string alone = bad_input_of([&] { verify_artifact(o); });
    EXPECT_NE(alone.find(t.field), std::string::npos) << alone;
    o.source = sample(t.base.sample);
    const std::string with_source = bad_input_of([&] { verify_artifact(o); });
    EXPECT_NE(with_source.find(t.field), std::string::npos) << with_source;
  }
}

// The untampered artifacts of the table pass, so the refusals above are the edits' doing.
TEST(ManifestValidation, TheUntamperedArtifactsVerify) {
  for (const Base& b : {kMxfp4, kNvfp4Tp2, kBf16Cpu, kGptqMarlin, kFp8Ep}) {
    SCOPED_TRACE(b.key());
    VerifyOptions o;
    o.artifact = artifacts().get(b);
    o.source = sample(b.sample);
    EXPECT_TRUE(verify_artifact(o).ok());
  }
}

// Edits the structure alone cannot see (a consistent backend and class swap, a changed run
// fact) are caught by comparing with the conversion of the source.
TEST(ManifestValidation, WithTheSourceEveryLayerMustBeWhatConvertingItGives) {
  test::TempDir dir;
  const std::string good = artifacts().get(kMxfp4);
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    const char* field;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"activation parameter changed", [](json& m) { layer0(m)["swiglu_limit"] = 1.0; }, "$.layers[0].swiglu_limit", "converting the source"},
      {"routing renormalization flipped", [](json& m) { layer0(m)["routing"]["renormalize"] = !layer0(m)["routing"]["renormalize"].get<bool>(); },
       "$.layers[0].routing.renormalize", "converting the source"},
      {"padding of another backend",
       [](json& m) {
         layer0(m)["padded_intermediate_size"] = layer0(m)["padded_intermediate_size"].get<uint64_t>();
         layer0(m)["activation"] = "silu";
       },
       "$.layers[0].activation", "converting the source"},
      {"a layer dropped", [](json& m) { m["layers"].erase(m["layers"].size() - 1); }, "$.layers", "MoE layers"},
      {"source scheme changed", [](json& m) { m["source"]["scheme"] = "gptq"; }, "$.source.scheme", "the source"},
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string bad = tampered_copy(good, dir.file(std::to_string(n++)), c.edit);
    VerifyOptions o;
    o.artifact = bad;
    o.source = sample("gpt-oss-mxfp4");
    const std::string msg = bad_input_of([&] { verify_artifact(o); });
    EXPECT_NE(msg.find(c.field), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.says), std::string::npos) << msg;
  }
}

TEST(TargetJson, RoundTripsEveryDeploymentFlag) {
  oracle::Deployment d = oracle::default_deployment(oracle::parse_target("sm100"));
  d.parallel.tp = 4;
  d.parallel.dp = 2;
  d.parallel.enable_expert_parallel = true;
  d.parallel.all2all_backend = "deepep_low_latency";
  d.moe_backend = "flashinfer_trtllm";
  d.lora = true;
  d.quantization = "moe_wna16";
  d.model_dtype = oracle::FloatType::float16;
  d.env.set("VLLM_USE_FLASHINFER_MOE_FP4", "1");
  oracle::set_package(d.packages, "flashinfer", false);
  const json written = target_json(d);
  EXPECT_EQ(target_json(deployment_from_target_json(written, "m.json")), written);
  const json host = target_json(oracle::default_deployment(oracle::detect_host_cpu()));
  EXPECT_EQ(target_json(deployment_from_target_json(host, "m.json")), host);
}

}  // namespace
}  // namespace moepack::runtime

namespace moepack::runtime {
namespace {

// A manifest written before `layers[i].vllm` existed is still the conversion of its source.
TEST(ManifestValidation, AManifestWithoutTheLaterVllmKeyStillVerifies) {
  test::TempDir dir;
  const std::string older = tampered_copy(artifacts().get(kMxfp4), dir.file("older"), [](json& m) {
    for (auto& l : m["layers"]) l.erase("vllm");
  });
  VerifyOptions o;
  o.artifact = older;
  o.source = sample(kMxfp4.sample);
  EXPECT_TRUE(verify_artifact(o).ok());
}

// The artifact holds its manifest and the files it lists, nothing else: a file the manifest does
// not vouch for, or an entry dropped from `files`, fails the integrity check (found by
// fuzz_verify_manifest: dropping generation_config.json's entry passed).
TEST(ManifestValidation, FilesTheManifestDoesNotListFailIntegrity) {
  test::TempDir dir;
  const std::string good = artifacts().get(kMxfp4);
  const std::string dropped = tampered_copy(good, dir.file("dropped"), [](json& m) { m["files"].erase(0); });
  const std::string extra = tampered_copy(good, dir.file("extra"), [](json&) {});
  test::write_text(extra + "/notes.txt", "added after conversion\n");
  for (const std::string& a : {dropped, extra}) {
    SCOPED_TRACE(a);
    VerifyOptions o;
    o.artifact = a;
    o.source = sample(kMxfp4.sample);
    const VerifyReport r = verify_artifact(o);
    EXPECT_FALSE(r.ok());
    ASSERT_FALSE(r.integrity.problems.empty());
    EXPECT_NE(r.integrity.problems.front().find("not in the manifest's files"), std::string::npos) << r.integrity.problems.front();
  }
}

}  // namespace
}  // namespace moepack::runtime
