// Inconsistent checkpoints are refused with exit code 4 and a message naming file, tensor and rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "checkpoints/fixtures.h"
#include "formats/checkpoints/checkpoint.h"
#include "lib/core/error.h"

namespace moepack::test {
namespace {

using nlohmann::json;

constexpr uint64_t H = 64, I = 32, E = 4;
const std::string kPrefix = "model.layers.0.mlp.experts";

std::vector<uint64_t> half(uint64_t o, uint64_t i) { return {o, i / 2}; }
std::vector<uint64_t> per32(uint64_t o, uint64_t i) { return {o, i / 32}; }

json mxfp4_config() {
  json c = moe_config("qwen3_moe", H, I, E);
  json group = {{"targets", {"Linear"}}, {"weights", {{"num_bits", 4}, {"type", "float"}, {"group_size", 32}, {"strategy", "group"}}}};
  c["quantization_config"] = {{"quant_method", "compressed-tensors"}, {"format", "mxfp4-pack-quantized"}, {"config_groups", {{"group_0", group}}}};
  return c;
}

CheckpointBuilder mxfp4_builder(const TempDir& tmp) {
  CheckpointBuilder b(tmp.path());
  add_per_expert_layer(b, kPrefix, E, H, I, {{"weight_packed", DType::U8, half}, {"weight_scale", DType::U8, per32}});
  return b;
}

// Runs open_checkpoint and returns the bad-input message (fails the test on anything else).
std::string bad_input_message(const std::string& path) {
  try {
    ckpt::open_checkpoint(path);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::bad_input) << e.what();
    EXPECT_EQ(e.exit_code(), 4);
    return e.what();
  }
  ADD_FAILURE() << "expected a bad-input error for " << path;
  return "";
}

void erase_tensor(CheckpointBuilder& b, const std::string& name) {
  auto& t = b.tensors();
  t.erase(std::remove_if(t.begin(), t.end(), [&](const FixtureTensor& x) { return x.name == name; }), t.end());
}

FixtureTensor& tensor(CheckpointBuilder& b, const std::string& name) {
  for (auto& t : b.tensors())
    if (t.name == name) return t;
  throw std::runtime_error("no fixture tensor " + name);
}

TEST(Errors, MissingScaleTensor) {
  TempDir tmp;
  auto b = mxfp4_builder(tmp);
  erase_tensor(b, kPrefix + ".2.up_proj.weight_scale");
  b.config(mxfp4_config()).write();
  std::string m = bad_input_message(tmp.path());
  EXPECT_NE(m.find("tensor `" + kPrefix + ".2.up_proj.weight_scale`"), std::string::npos) << m;
  EXPECT_NE(m.find("missing tensor"), std::string::npos) << m;
  EXPECT_NE(m.find("expert 2 of 4"), std::string::npos) << m;
}

TEST(Errors, MissingExpert) {
  TempDir tmp;
  auto b = mxfp4_builder(tmp);
  for (const char* p : {"gate_proj", "up_proj", "down_proj"})
    for (const char* s : {"weight_packed", "weight_scale"}) erase_tensor(b, kPrefix + ".1." + p + "." + s);
  b.config(mxfp4_config()).write();
  std::string m = bad_input_message(tmp.path());
  EXPECT_NE(m.find(kPrefix + ".1.gate_proj.weight_packed"), std::string::npos) << m;
}

TEST(Errors, ExpertBeyondConfig) {
  TempDir tmp;
  auto b = mxfp4_builder(tmp);
  b.add(kPrefix + ".4.gate_proj.weight_packed", DType::U8, {I, H / 2});
  b.config(mxfp4_config()).write();
  std::string m = bad_input_message(tmp.path());
  EXPECT_NE(m.find("out of range"), std::string::npos) << m;
  EXPECT_NE(m.find("4 experts"), std::string::npos) << m;
}

TEST(Errors, GateRowsDoNotMatchIntermediateSize) {
  TempDir tmp;
  auto b = mxfp4_builder(tmp);
  tensor(b, kPrefix + ".0.gate_proj.weight_packed").shape = {I + 16, H / 2};
  b.config(mxfp4_config()).write();
  std::string m = bad_input_message(tmp.path());
  EXPECT_NE(m.find("model.safetensors: tensor `" + kPrefix + ".0.gate_proj.weight_packed`"), std::string::npos) << m;
  EXPECT_NE(m.find("shape [48, 32] does not match config.json: expected [32, 32]"), std::string::npos) << m;
}

TEST(Errors, PackedKIsNotHalfTheHiddenSize) {
  TempDir tmp;
  auto b = mxfp4_builder(tmp);
  tensor(b, kPrefix + ".3.up_proj.weight_packed").shape = {I, H};
  b.config(mxfp4_config()).write();
  std::string m = bad_input_message(tmp.path());
  EXPECT_NE(m.find(kPrefix + ".3.up_proj.weight_packed"), std::string::npos) << m;
  EXPECT_NE(m.find("expected [32, 32]"), std::string::npos) << m;
}

TEST(Errors, MismatchedDtype) {
  TempDir tmp;
  auto b = mxfp4_builder(tmp);
  tensor(b, kPrefix + ".0.down_proj.weight_scale").dtype = DType::F8_E4M3;
  b.config(mxfp4_config()).write();
  std::string m = bad_input_message(tmp.path());
  EXPECT_NE(m.find(kPrefix + ".0.down_proj.weight_scale"), std::string::npos) << m;
  EXPECT_NE(m.find("dtype F8_E4M3 does not match scheme `mxfp4` (expected U8)"), std::string::npos) << m;
}

TEST(Errors, UnexpectedExpertTensor) {
  TempDir tmp;
  auto b = mxfp4_builder(tmp);
  b.add(kPrefix + ".0.gate_proj.weight_global_scale", DType::F32, {1});
  b.config(mxfp4_config()).write();
  std::string m = bad_input_message(tmp.path());
  EXPECT_NE(m.find("unexpected expert tensor"), std::string::npos) << m;
  EXPECT_NE(m.find("weight_global_scale"), std::string::npos) << m;
}

TEST(Errors, UnknownQuantMethod) {
  TempDir tmp;
  auto b = mxfp4_builder(tmp);
  json c = mxfp4_config();
  c["quantization_config"] = {{"quant_method", "bitsandbytes_9bit"}};
  b.config(c).write();
  std::string m = bad_input_message(tmp.path());
  EXPECT_NE(m.find("config.json"), std::string::npos) << m;
  EXPECT_NE(m.find("unknown quant_method `bitsandbytes_9bit`"), std::string::npos) << m;
}

TEST(Errors, ConfigMissingOrNotAnObject) {
  {
    // Without a config the file is described, not refused: only plan/convert need it.
    TempDir tmp;
    mxfp4_builder(tmp).write();
    ckpt::Checkpoint c = ckpt::open_checkpoint(tmp.path());
    EXPECT_FALSE(c.has_config);
    EXPECT_EQ(c.scheme_id, "unknown");
    ASSERT_EQ(c.layers.size(), 1u);
    EXPECT_EQ(c.layers[0].quant.scheme, "unknown");
    EXPECT_THROW(ckpt::read_expert_params(c, c.layers[0], 0), Error);
  }
  {
    TempDir tmp;
    mxfp4_builder(tmp).write();
    write_text(tmp.file("config.json"), "[1, 2, 3]");
    std::string m = bad_input_message(tmp.path());
    EXPECT_NE(m.find("config.json is not a JSON object"), std::string::npos) << m;
  }
  {
    TempDir tmp;  // duplicate keys are refused by the strict reader
    mxfp4_builder(tmp).write();
    write_text(tmp.file("config.json"), R"({"hidden_size": 64, "hidden_size": 65})");
    std::string m = bad_input_message(tmp.path());
    EXPECT_NE(m.find("config.json"), std::string::npos) << m;
  }
}

TEST(Errors, ConfigKeysWithWrongTypes) {
  TempDir tmp;
  auto b = mxfp4_builder(tmp);
  json c = mxfp4_config();
  c["hidden_size"] = "sixty-four";
  b.config(c).write();
  std::string m = bad_input_message(tmp.path());
  EXPECT_NE(m.find("`hidden_size` must be an integer"), std::string::npos) << m;
}

TEST(Errors, GptOssFusedShapeMismatch) {
  TempDir tmp;
  CheckpointBuilder b(tmp.path());
  const std::string p = "model.layers.0.mlp.experts";
  b.add(p + ".gate_up_proj_blocks", DType::U8, {E, 2 * I, H / 32, 16});
  b.add(p + ".gate_up_proj_scales", DType::U8, {E, 2 * I, H / 32});
  b.add(p + ".gate_up_proj_bias", DType::BF16, {E, 2 * I});
  b.add(p + ".down_proj_blocks", DType::U8, {E, H, I / 32, 16});
  b.add(p + ".down_proj_scales", DType::U8, {E, H, I / 32 + 1});
  b.add(p + ".down_proj_bias", DType::BF16, {E, H});
  json c = moe_config("gpt_oss", H, I, E);
  c["quantization_config"] = {{"quant_method", "mxfp4"}};
  b.config(c).write();
  std::string m = bad_input_message(tmp.path());
  EXPECT_NE(m.find(p + ".down_proj_scales"), std::string::npos) << m;
  EXPECT_NE(m.find("shape [4, 64, 2] does not match config.json: expected [4, 64, 1]"), std::string::npos) << m;
}

TEST(Errors, CompressedTensorsInputScalesMustAgree) {
  // Found when reading the expert (vLLM raises while loading): gate and up input scales differ.
  TempDir tmp;
  CheckpointBuilder b(tmp.path());
  json fw = {{"num_bits", 8}, {"type", "float"}, {"symmetric", true}, {"strategy", "tensor"}, {"dynamic", false}};
  add_per_expert_layer(b, kPrefix, 1, H, I,
                       {{"weight", DType::F8_E4M3, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i}; }},
                        {"weight_scale", DType::F32, one_shape},
                        {"input_scale", DType::F32, one_shape}});
  tensor(b, kPrefix + ".0.gate_proj.input_scale").bytes = f32_bytes({0.5f});
  tensor(b, kPrefix + ".0.up_proj.input_scale").bytes = f32_bytes({0.25f});
  json c = moe_config("qwen3_moe", H, I, 1);
  json group = {{"targets", {"Linear"}}, {"weights", fw}, {"input_activations", fw}};
  c["quantization_config"] = {{"quant_method", "compressed-tensors"}, {"format", "float-quantized"}, {"config_groups", {{"group_0", group}}}};
  b.config(c).write();
  auto ck = ckpt::open_checkpoint(tmp.path());
  try {
    ckpt::read_expert_params(ck, ck.layers.at(0), 0);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::bad_input);
    EXPECT_NE(std::string(e.what()).find("input_scale"), std::string::npos) << e.what();
  }
}

// Quark's FP8/INT4 W4A8 scheme (a two-entry weight list) is named, not called malformed.
TEST(Errors, QuarkFp8Int4W4a8IsNamedAsUnread) {
  TempDir tmp;
  const std::string sample = source_dir() + "/samples/quark-w-mxfp4-a-fp8";
  for (const auto& f : std::filesystem::directory_iterator(sample)) std::filesystem::copy(f.path(), tmp.file(f.path().filename().string()));
  std::vector<uint8_t> bytes = read_file(tmp.file("config.json"));
  json c = json::parse(bytes.begin(), bytes.end());
  c["quantization_config"]["global_quant_config"]["weight"] =
      json::array({{{"dtype", "fp8_e4m3"}, {"qscheme", "per_tensor"}, {"is_dynamic", false}},
                   {{"dtype", "int4"}, {"qscheme", "per_channel"}, {"symmetric", true}, {"ch_axis", 0}, {"is_dynamic", false}}});
  write_text(tmp.file("config.json"), c.dump());
  std::string m = bad_input_message(tmp.path());
  EXPECT_NE(m.find("QuarkW4A8Fp8MoEMethod"), std::string::npos) << m;
  EXPECT_NE(m.find("config.json"), std::string::npos) << m;
}

TEST(Errors, MalformedShardIsRefused) {
  TempDir tmp;
  write_file(tmp.file("model.safetensors"), safetensors_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", {0, 0, 0, 0}));
  std::string m = bad_input_message(tmp.path());
  EXPECT_NE(m.find("model.safetensors"), std::string::npos) << m;
}

}  // namespace
}  // namespace moepack::test
