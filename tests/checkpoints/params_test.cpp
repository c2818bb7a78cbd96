// Canonical params of one expert, byte-checked against hand-built small checkpoints.
#include <gtest/gtest.h>

#include "checkpoints/fixtures.h"
#include "formats/checkpoints/checkpoint.h"
#include "lib/core/error.h"

namespace moepack::test {
namespace {

using nlohmann::json;

FixtureTensor& tensor(CheckpointBuilder& b, const std::string& name) {
  for (auto& t : b.tensors())
    if (t.name == name) return t;
  throw std::runtime_error("no fixture tensor " + name);
}

std::vector<uint8_t> concat(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<int32_t> as_i32(const OwnedTensor& t) {
  std::vector<int32_t> v(t.bytes.size() / 4);
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

std::vector<float> as_f32(const OwnedTensor& t) {
  std::vector<float> v(t.bytes.size() / 4);
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

const OwnedTensor& param(const ckpt::ExpertParams& p, const std::string& name) {
  auto it = p.tensors.find(name);
  if (it == p.tensors.end()) throw std::runtime_error("no param " + name);
  return it->second;
}

TEST(Params, CompressedTensorsNvfp4StacksGateThenUp) {
  constexpr uint64_t H = 32, I = 32, E = 2;
  TempDir tmp;
  CheckpointBuilder b(tmp.path());
  const std::string p = "model.layers.0.mlp.experts";
  add_per_expert_layer(b, p, E, H, I,
                       {{"weight_packed", DType::U8, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i / 2}; }},
                        {"weight_scale", DType::F8_E4M3, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i / 16}; }},
                        {"weight_global_scale", DType::F32, one_shape}});
  tensor(b, p + ".1.gate_proj.weight_global_scale").bytes = f32_bytes({2.0f});
  tensor(b, p + ".1.up_proj.weight_global_scale").bytes = f32_bytes({4.0f});
  tensor(b, p + ".1.down_proj.weight_global_scale").bytes = f32_bytes({8.0f});
  for (auto& t : b.tensors())
    if (t.bytes.empty()) t.bytes = pattern_bytes(byte_size(t.dtype, t.shape), static_cast<uint32_t>(t.name.size() * 31 + t.name.back()));
  json nv = {{"num_bits", 4}, {"type", "float"}, {"symmetric", true}, {"group_size", 16}, {"strategy", "tensor_group"}};
  json config = moe_config("qwen3_moe", H, I, E);
  json group = {{"targets", {"Linear"}}, {"weights", nv}};
  config["quantization_config"] = {{"quant_method", "compressed-tensors"}, {"format", "nvfp4-pack-quantized"}, {"config_groups", {{"group_0", group}}}};
  b.config(config).write();

  auto ck = ckpt::open_checkpoint(tmp.path());
  auto params = ckpt::read_expert_params(ck, ck.layers.at(0), 1);
  EXPECT_EQ(params.w13_order, ckpt::W13Order::gate_then_up);
  ASSERT_EQ(params.tensors.size(), 6u);
  const auto& w13 = param(params, "w13_weight_packed");
  EXPECT_EQ(w13.dtype, DType::U8);
  EXPECT_EQ(w13.shape, (std::vector<uint64_t>{2 * I, H / 2}));
  EXPECT_EQ(w13.bytes, concat(tensor(b, p + ".1.gate_proj.weight_packed").bytes, tensor(b, p + ".1.up_proj.weight_packed").bytes));
  const auto& s13 = param(params, "w13_weight_scale");
  EXPECT_EQ(s13.dtype, DType::F8_E4M3);
  EXPECT_EQ(s13.shape, (std::vector<uint64_t>{2 * I, H / 16}));
  EXPECT_EQ(s13.bytes, concat(tensor(b, p + ".1.gate_proj.weight_scale").bytes, tensor(b, p + ".1.up_proj.weight_scale").bytes));
  EXPECT_EQ(param(params, "w2_weight_packed").bytes, tensor(b, p + ".1.down_proj.weight_packed").bytes);
  EXPECT_EQ(param(params, "w2_weight_packed").shape, (std::vector<uint64_t>{H, I / 2}));
  // Global scales: per shard for w13 ([2] = gate, up), a scalar for w2; raw divisor values.
  const auto& g13 = param(params, "w13_weight_global_scale");
  EXPECT_EQ(g13.shape, (std::vector<uint64_t>{2}));
  EXPECT_EQ(as_f32(g13), (std::vector<float>{2.0f, 4.0f}));
  const auto& g2 = param(params, "w2_weight_global_scale");
  EXPECT_TRUE(g2.shape.empty());
  EXPECT_EQ(as_f32(g2), (std::vector<float>{8.0f}));
}

TEST(Params, GptqJoinsGateAndUpAlongColumns) {
  constexpr uint64_t H = 64, I = 16, G = 32;
  TempDir tmp;
  CheckpointBuilder b(tmp.path());
  const std::string p = "model.layers.0.mlp.experts";
  // qweight [H/8, out]: value 1000*row + col for gate, negated for up.
  auto qweight = [](uint64_t rows, uint64_t cols, int sign) {
    std::vector<int32_t> v;
    for (uint64_t r = 0; r < rows; ++r)
      for (uint64_t c = 0; c < cols; ++c) v.push_back(sign * static_cast<int32_t>(1000 * r + c + 1));
    return i32_bytes(v);
  };
  std::vector<int32_t> g_idx;
  for (uint64_t k = 0; k < H; ++k) g_idx.push_back(static_cast<int32_t>(k / G));
  for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
    bool down = std::string(proj) == "down_proj";
    uint64_t out = down ? H : I, in = down ? I : H;
    int sign = std::string(proj) == "up_proj" ? -1 : 1;
    b.add(p + ".0." + proj + ".qweight", DType::I32, {in / 8, out}, qweight(in / 8, out, sign));
    b.add(p + ".0." + proj + ".qzeros", DType::I32, {(in + G - 1) / G, out / 8});
    b.add(p + ".0." + proj + ".scales", DType::F16, {(in + G - 1) / G, out});
    std::vector<int32_t> gi;
    for (uint64_t k = 0; k < in; ++k) gi.push_back(static_cast<int32_t>(k / G));
    b.add(p + ".0." + proj + ".g_idx", DType::I32, {in}, i32_bytes(gi));
  }
  json config = moe_config("qwen3_moe", H, I, 1);
  config["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", G}, {"desc_act", false}, {"sym", true}};
  b.config(config).write();

  auto ck = ckpt::open_checkpoint(tmp.path());
  auto params = ckpt::read_expert_params(ck, ck.layers.at(0), 0);
  const auto& w13 = param(params, "w13_qweight");
  ASSERT_EQ(w13.shape, (std::vector<uint64_t>{H / 8, 2 * I}));
  auto v = as_i32(w13);
  for (uint64_t r = 0; r < H / 8; ++r)
    for (uint64_t c = 0; c < 2 * I; ++c) {
      int32_t want = c < I ? static_cast<int32_t>(1000 * r + c + 1) : -static_cast<int32_t>(1000 * r + (c - I) + 1);
      ASSERT_EQ(v[r * 2 * I + c], want) << "row " << r << " col " << c;
    }
  EXPECT_EQ(param(params, "w13_qzeros").shape, (std::vector<uint64_t>{H / G, 2 * I / 8}));
  EXPECT_EQ(param(params, "w13_scales").shape, (std::vector<uint64_t>{H / G, 2 * I}));
  EXPECT_EQ(param(params, "w13_scales").dtype, DType::F16);  // raw; vLLM casts to the model dtype on load
  EXPECT_EQ(as_i32(param(params, "w13_g_idx")), g_idx);
  EXPECT_EQ(param(params, "w2_qweight").shape, (std::vector<uint64_t>{I / 8, H}));
  EXPECT_EQ(param(params, "w2_qweight").bytes, tensor(b, p + ".0.down_proj.qweight").bytes);
}

TEST(Params, CompressedTensorsWna16IsTransposed) {
  constexpr uint64_t H = 16, I = 8, G = 8;  // weight_packed [out, in/8]
  TempDir tmp;
  CheckpointBuilder b(tmp.path());
  const std::string p = "model.layers.0.mlp.experts";
  auto matrix = [](uint64_t rows, uint64_t cols, int32_t base) {
    std::vector<int32_t> v;
    for (uint64_t r = 0; r < rows; ++r)
      for (uint64_t c = 0; c < cols; ++c) v.push_back(base + static_cast<int32_t>(100 * r + c));
    return i32_bytes(v);
  };
  for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
    bool down = std::string(proj) == "down_proj";
    uint64_t out = down ? H : I, in = down ? I : H;
    int32_t base = std::string(proj) == "gate_proj" ? 10000 : std::string(proj) == "up_proj" ? 20000 : 30000;
    b.add(p + ".0." + proj + ".weight_packed", DType::I32, {out, in / 8}, matrix(out, in / 8, base));
    b.add(p + ".0." + proj + ".weight_scale", DType::BF16, {out, in / G});
    b.add(p + ".0." + proj + ".weight_zero_point", DType::I32, {out / 8, in / G}, matrix(out / 8, in / G, base + 5000));
    b.add(p + ".0." + proj + ".weight_shape", DType::I64, {2});
  }
  // weight_shape must be equal across gate and up ([out, in] of each): give both the same bytes.
  tensor(b, p + ".0.up_proj.weight_shape").bytes = tensor(b, p + ".0.gate_proj.weight_shape").bytes = pattern_bytes(16, 7);
  json w = {{"num_bits", 4}, {"type", "int"}, {"symmetric", false}, {"group_size", G}, {"strategy", "group"}};
  json config = moe_config("qwen3_moe", H, I, 1);
  json group = {{"targets", {"Linear"}}, {"weights", w}};
  config["quantization_config"] = {{"quant_method", "compressed-tensors"}, {"format", "pack-quantized"}, {"config_groups", {{"group_0", group}}}};
  b.config(config).write();

  auto ck = ckpt::open_checkpoint(tmp.path());
  auto params = ckpt::read_expert_params(ck, ck.layers.at(0), 0);
  const auto& w13 = param(params, "w13_weight_packed");
  ASSERT_EQ(w13.shape, (std::vector<uint64_t>{H / 8, 2 * I}));
  auto v = as_i32(w13);
  for (uint64_t k = 0; k < H / 8; ++k)
    for (uint64_t n = 0; n < 2 * I; ++n) {
      int32_t want = (n < I ? 10000 : 20000) + static_cast<int32_t>(100 * (n % I) + k);
      ASSERT_EQ(v[k * 2 * I + n], want) << k << "," << n;
    }
  const auto& z13 = param(params, "w13_weight_zero_point");
  ASSERT_EQ(z13.shape, (std::vector<uint64_t>{H / G, 2 * I / 8}));
  EXPECT_EQ(as_i32(z13), (std::vector<int32_t>{15000, 25000, 15001, 25001}));
  const auto& w2 = param(params, "w2_weight_packed");
  ASSERT_EQ(w2.shape, (std::vector<uint64_t>{I / 8, H}));
  EXPECT_EQ(as_i32(w2)[3], 30000 + 300);  // w2[k=0][n=3] = down[n=3][k=0]
  EXPECT_EQ(param(params, "w13_weight_shape").shape, (std::vector<uint64_t>{2}));
}

TEST(Params, GptOssSlicesOneExpertAndKeepsInterleavedRows) {
  constexpr uint64_t H = 64, I = 32, E = 3;
  TempDir tmp;
  CheckpointBuilder b(tmp.path());
  const std::string p = "model.layers.0.mlp.experts";
  b.add(p + ".gate_up_proj_blocks", DType::U8, {E, 2 * I, H / 32, 16});
  b.add(p + ".gate_up_proj_scales", DType::U8, {E, 2 * I, H / 32});
  b.add(p + ".gate_up_proj_bias", DType::BF16, {E, 2 * I});
  b.add(p + ".down_proj_blocks", DType::U8, {E, H, I / 32, 16});
  b.add(p + ".down_proj_scales", DType::U8, {E, H, I / 32});
  b.add(p + ".down_proj_bias", DType::BF16, {E, H});
  for (auto& t : b.tensors()) t.bytes = pattern_bytes(byte_size(t.dtype, t.shape), static_cast<uint32_t>(t.name.size()));
  json config = moe_config("gpt_oss", H, I, E);
  config["quantization_config"] = {{"quant_method", "mxfp4"}};
  b.config(config).write();

  auto ck = ckpt::open_checkpoint(tmp.path());
  auto params = ckpt::read_expert_params(ck, ck.layers.at(0), 2);
  EXPECT_EQ(params.w13_order, ckpt::W13Order::interleaved);
  const auto& blocks = tensor(b, p + ".gate_up_proj_blocks").bytes;
  const uint64_t per = blocks.size() / E;
  const auto& w13 = param(params, "w13_weight");
  EXPECT_EQ(w13.shape, (std::vector<uint64_t>{2 * I, H / 2}));
  EXPECT_EQ(w13.bytes, std::vector<uint8_t>(blocks.begin() + 2 * per, blocks.end()));
  const auto& bias = tensor(b, p + ".down_proj_bias").bytes;
  EXPECT_EQ(param(params, "w2_bias").bytes, std::vector<uint8_t>(bias.begin() + 2 * H * 2, bias.end()));
  EXPECT_EQ(param(params, "w2_bias").dtype, DType::BF16);
  EXPECT_EQ(param(params, "w2_weight_scale").shape, (std::vector<uint64_t>{H, I / 32}));
}

// gate (w1) and up (w3) input scales write the same slot of w13_input_scale; vLLM's loader meets
// them in sorted name order within a shard, so up's value survives even when gate's is larger.
TEST(Params, Fp8PerTensorScalesAndTheInputScaleLoadedLast) {
  constexpr uint64_t H = 32, I = 16;
  TempDir tmp;
  CheckpointBuilder b(tmp.path());
  const std::string p = "model.layers.0.block_sparse_moe.experts";
  add_per_expert_layer(b, p, 1, H, I,
                       {{"weight", DType::F8_E4M3, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i}; }},
                        {"weight_scale", DType::F32, scalar_shape},
                        {"input_scale", DType::F32, scalar_shape}},
                       "w1", "w3", "w2");
  tensor(b, p + ".0.w1.weight_scale").bytes = f32_bytes({0.125f});
  tensor(b, p + ".0.w3.weight_scale").bytes = f32_bytes({0.25f});
  tensor(b, p + ".0.w2.weight_scale").bytes = f32_bytes({0.5f});
  tensor(b, p + ".0.w1.input_scale").bytes = f32_bytes({0.75f});
  tensor(b, p + ".0.w3.input_scale").bytes = f32_bytes({0.5f});
  tensor(b, p + ".0.w2.input_scale").bytes = f32_bytes({1.5f});
  json config = moe_config("mixtral", H, I, 1);
  config["quantization_config"] = {{"quant_method", "fp8"}, {"activation_scheme", "static"}};
  b.config(config).write();

  auto ck = ckpt::open_checkpoint(tmp.path());
  auto params = ckpt::read_expert_params(ck, ck.layers.at(0), 0);
  EXPECT_EQ(param(params, "w13_weight").bytes, concat(tensor(b, p + ".0.w1.weight").bytes, tensor(b, p + ".0.w3.weight").bytes));
  EXPECT_EQ(as_f32(param(params, "w13_weight_scale")), (std::vector<float>{0.125f, 0.25f}));
  EXPECT_EQ(as_f32(param(params, "w13_input_scale")), (std::vector<float>{0.5f}));
  EXPECT_TRUE(param(params, "w13_input_scale").shape.empty());
  EXPECT_EQ(as_f32(param(params, "w2_input_scale")), (std::vector<float>{1.5f}));
}

// Across shards the loader's file order decides: natural sort, so model-2 comes before model-10
// (plain text order would put model-10 first). Gate lives in model-10 here, so gate survives.
TEST(Params, QuarkInputScaleLoadedLastAcrossShardsInNaturalOrder) {
  constexpr uint64_t H = 64, I = 64;
  TempDir tmp;
  CheckpointBuilder all(tmp.path());
  const std::string p = "model.layers.0.mlp.experts";
  add_per_expert_layer(all, p, 1, H, I,
                       {{"weight", DType::U8, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i / 2}; }},
                        {"weight_scale", DType::U8, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i / 32}; }},
                        {"input_scale", DType::F32, scalar_shape}});
  for (auto& t : all.tensors())
    if (t.name.find("weight_scale") != std::string::npos) t.bytes.assign(byte_size(t.dtype, t.shape), 127);
  tensor(all, p + ".0.gate_proj.input_scale").bytes = f32_bytes({0.25f});
  tensor(all, p + ".0.up_proj.input_scale").bytes = f32_bytes({0.75f});
  CheckpointBuilder first(tmp.path()), second(tmp.path());
  json weight_map = json::object();
  for (const auto& t : all.tensors()) {
    const bool gate = t.name.find("gate_proj") != std::string::npos;
    (gate ? second : first).add(t.name, t.dtype, t.shape, t.bytes);
    weight_map[t.name] = gate ? "model-10.safetensors" : "model-2.safetensors";
  }
  first.write("model-2.safetensors");
  second.write("model-10.safetensors");
  all.side_file("model.safetensors.index.json", {{"weight_map", weight_map}});
  json config = moe_config("qwen3_moe", H, I, 1);
  // The quantization_config of the shipped w_mxfp4_a_fp8 sample (as Quark exports it).
  config["quantization_config"] = json::parse(read_file(source_dir() + "/samples/quark-w-mxfp4-a-fp8/config.json"))["quantization_config"];
  all.config(config);

  auto ck = ckpt::open_checkpoint(tmp.path());
  ASSERT_EQ(ck.layers.at(0).quant.input_scales, "static");
  auto params = ckpt::read_expert_params(ck, ck.layers.at(0), 0);
  EXPECT_EQ(as_f32(param(params, "w13_input_scale")), (std::vector<float>{0.25f}));
}

TEST(Params, DeepSeekV4RelabelsFp4BytesAsU8) {
  constexpr uint64_t H = 64, I = 32;
  TempDir tmp;
  CheckpointBuilder b(tmp.path());
  const std::string p = "layers.0.ffn.experts";
  add_per_expert_layer(b, p, 2, H, I,
                       {{"weight", DType::I8, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i / 2}; }},
                        {"scale", DType::F8_E8M0, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i / 32}; }}},
                       "w1", "w3", "w2");
  json config = moe_config("deepseek_v4", H, I, 2);
  config["quantization_config"] = {{"quant_method", "fp8"}};
  b.config(config).write();

  auto ck = ckpt::open_checkpoint(tmp.path());
  auto params = ckpt::read_expert_params(ck, ck.layers.at(0), 1);
  const auto& w13 = param(params, "w13_weight");
  EXPECT_EQ(w13.dtype, DType::U8);
  EXPECT_EQ(w13.bytes, concat(tensor(b, p + ".1.w1.weight").bytes, tensor(b, p + ".1.w3.weight").bytes));
  const auto& s2 = param(params, "w2_weight_scale");
  EXPECT_EQ(s2.dtype, DType::U8);
  EXPECT_EQ(s2.bytes, tensor(b, p + ".1.w2.scale").bytes);
}

TEST(Params, UnquantizedWithBiases) {
  constexpr uint64_t H = 8, I = 4;
  TempDir tmp;
  CheckpointBuilder b(tmp.path());
  const std::string p = "model.layers.0.mlp.experts";
  add_per_expert_layer(b, p, 1, H, I,
                       {{"weight", DType::BF16, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i}; }},
                        {"bias", DType::BF16, [](uint64_t o, uint64_t) { return std::vector<uint64_t>{o}; }}});
  b.config(moe_config("qwen3_moe", H, I, 1)).write();
  auto ck = ckpt::open_checkpoint(tmp.path());
  EXPECT_TRUE(ck.layers.at(0).has_bias);
  auto params = ckpt::read_expert_params(ck, ck.layers.at(0), 0);
  const auto& b13 = param(params, "w13_bias");
  EXPECT_EQ(b13.shape, (std::vector<uint64_t>{2 * I}));
  EXPECT_EQ(b13.bytes, concat(tensor(b, p + ".0.gate_proj.bias").bytes, tensor(b, p + ".0.up_proj.bias").bytes));
  EXPECT_EQ(param(params, "w2_weight").shape, (std::vector<uint64_t>{H, I}));
}

TEST(Params, ExpertOutOfRangeIsAUsageError) {
  TempDir tmp;
  CheckpointBuilder b(tmp.path());
  add_per_expert_layer(b, "model.layers.0.mlp.experts", 2, 8, 4, {{"weight", DType::BF16, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i}; }}});
  b.config(moe_config("qwen3_moe", 8, 4, 2)).write();
  auto ck = ckpt::open_checkpoint(tmp.path());
  try {
    ckpt::read_expert_params(ck, ck.layers.at(0), 2);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::usage);
  }
}

}  // namespace
}  // namespace moepack::test
