// `run` (lib/convert/run_layer): the artifact's layer on given inputs equals the source's
// reference for the same inputs and routing; the router can be bypassed; every input that breaks
// the contract of moepack-run(1) is bad input naming the file, the tensor and the rule, and
// leaves no output behind.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>

#include "formats/checkpoints/checkpoint.h"
#include "formats/safetensors/file.h"
#include "formats/safetensors/writer.h"
#include "lib/runtime/artifact_runtime.h"
#include "lib/runtime/run_layer.h"
#include "lib/runtime/verify.h"
#include "lib/core/codecs.h"
#include "lib/core/error.h"
#include "lib/synth/synth.h"
#include "support/artifacts.h"
#include "support/test_support.h"

namespace moepack::runtime {
namespace {
namespace fs = std::filesystem;

std::string sample(const std::string& name) { return test::source_dir() + "/samples/" + name; }

using test::convert_checkpoint;

// A tensor of the input file: name, dtype, shape and its bytes.
struct In {
  std::string name;
  DType dtype;
  std::vector<uint64_t> shape;
  std::vector<uint8_t> bytes;
};

In f32(const std::string& name, std::vector<uint64_t> shape, const std::vector<float>& v) {
  In t{name, DType::F32, std::move(shape), std::vector<uint8_t>(v.size() * 4)};
  if (!v.empty()) std::memcpy(t.bytes.data(), v.data(), t.bytes.size());  // memcpy of an empty vector's null pointer is UB
  return t;
}
In bf16(const std::string& name, std::vector<uint64_t> shape, const std::vector<float>& v) {
  In t{name, DType::BF16, std::move(shape), {}};
  for (float x : v) {
    const uint16_t b = float_to_bf16(x);
    t.bytes.push_back(static_cast<uint8_t>(b & 0xFF));
    t.bytes.push_back(static_cast<uint8_t>(b >> 8));
  }
  return t;
}
template <typename I>
In ints(const std::string& name, DType dtype, std::vector<uint64_t> shape, const std::vector<I>& v) {
  In t{name, dtype, std::move(shape), std::vector<uint8_t>(v.size() * sizeof(I))};
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

void write_input(const std::string& path, std::vector<In> tensors) {
  std::vector<st::TensorSpec> specs;
  for (const auto& t : tensors) specs.push_back({t.name, t.dtype, t.shape});
  st::sort_like_reference_writer(specs);
  st::Writer w(path, specs);
  for (const auto& s : specs)
    for (const auto& t : tensors)
      if (t.name == s.name) w.write(t.bytes);
  w.commit();
}

std::vector<float> seeded(uint64_t n, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t s = seed * 2654435761u + 1;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>(static_cast<int64_t>(s >> 40) - (1 << 23)) / static_cast<float>(1 << 23) * 2.0f;
  }
  return v;
}

template <typename T>
std::vector<T> read_values(const std::string& path, const std::string& name) {
  st::File f(path);
  const st::TensorInfo* t = f.find(name);
  EXPECT_NE(t, nullptr) << name;
  if (!t) return {};
  std::vector<uint8_t> b = f.read_all(*t);
  std::vector<T> v(b.size() / sizeof(T));
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

double rel_error(const std::vector<float>& got, const std::vector<float>& ref) {
  double err = 0, scale = 1e-30;
  for (size_t i = 0; i < ref.size(); ++i) {
    err = std::max(err, std::fabs(static_cast<double>(got[i]) - ref[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(ref[i])));
  }
  return err / scale;
}

struct Case {
  std::string sample, target;
  int tp;
};

TEST(Run, EqualsTheSourceReferenceForTheSameInputs) {
  for (const Case& c : {Case{"gpt-oss-mxfp4", "sm90", 1}, Case{"gpt-oss-mxfp4", "cpu-amx", 1}, Case{"quark-w-mxfp4", "sm90", 2}}) {
    SCOPED_TRACE(c.sample + " " + c.target + " tp" + std::to_string(c.tp));
    test::TempDir dir;
    const std::string art = dir.file("a");
    convert_checkpoint(sample(c.sample), c.target, art, c.tp);
    ArtifactRuntime rt(art);
    const artifact::Layer& L = rt.manifest().layers[0];
    const uint64_t T = 5, H = L.hidden_size, E = L.num_experts;
    const std::vector<float> x = seeded(T * H, 1), logits = seeded(T * E, 2);
    for (bool as_bf16 : {false, true}) {
      SCOPED_TRACE(as_bf16 ? "BF16 inputs" : "F32 inputs");
      const std::string in = dir.file("x.safetensors"), out = dir.file("y.safetensors");
      write_input(in, {as_bf16 ? bf16("hidden_states", {T, H}, x) : f32("hidden_states", {T, H}, x),
                       as_bf16 ? bf16("router_logits", {T, E}, logits) : f32("router_logits", {T, E}, logits)});
      RunReport r = run_layer({art, in, out, std::nullopt});
      EXPECT_EQ(r.tokens, T);
      EXPECT_EQ(r.routing, "router_logits");
      EXPECT_EQ(r.ranks, static_cast<uint64_t>(c.tp));

      // The same inputs as the file holds them (BF16 rounds), routed and run from the source.
      std::vector<float> xs = x, ls = logits;
      if (as_bf16) {
        for (auto& v : xs) v = bf16_to_float(float_to_bf16(v));
        for (auto& v : ls) v = bf16_to_float(float_to_bf16(v));
      }
      const experts::Routing routing = rt.route(0, ls, T);
      ckpt::Checkpoint src = ckpt::open_checkpoint(sample(c.sample));
      const std::vector<float> ref = run_reference(src, sample(c.sample), L, xs, routing, T, "bf16");
      const std::vector<float> y = read_values<float>(out, "output");
      ASSERT_EQ(y.size(), T * H);
      EXPECT_LE(rel_error(y, ref), 1e-5);
      const std::vector<int32_t> ids = read_values<int32_t>(out, "topk_ids");
      EXPECT_EQ(std::vector<uint32_t>(ids.begin(), ids.end()), routing.ids);
      EXPECT_EQ(read_values<float>(out, "topk_weights"), routing.weights);
      st::File yf(out);
      EXPECT_EQ(yf.find("output")->shape, (std::vector<uint64_t>{T, H}));
      EXPECT_EQ(yf.find("topk_ids")->dtype, DType::I32);
      EXPECT_EQ(yf.find("topk_ids")->shape, (std::vector<uint64_t>{T, L.top_k}));
    }
  }
}

TEST(Run, GivenTopkBypassesTheRouter) {
  test::TempDir dir;
  const std::string art = dir.file("a");
  convert_checkpoint(sample("gpt-oss-mxfp4"), "sm90", art);
  ArtifactRuntime rt(art);
  const artifact::Layer& L = rt.manifest().layers[0];
  const uint64_t T = 3, H = L.hidden_size, k = 3;  // k need not be the layer's top_k
  ASSERT_EQ(L.num_experts, 4u);
  const std::vector<float> x = seeded(T * H, 7);
  const std::vector<int64_t> ids = {3, 0, 1, 2, 1, 0, 0, 3, 2};
  const std::vector<float> w = {0.5f, 0.25f, 0.25f, 1.0f, -0.5f, 0.0f, 0.1f, 0.2f, 0.7f};
  experts::Routing given;
  given.tokens = T;
  given.top_k = k;
  given.ids.assign(ids.begin(), ids.end());
  given.weights = w;
  ckpt::Checkpoint src = ckpt::open_checkpoint(sample("gpt-oss-mxfp4"));
  const std::vector<float> ref = run_reference(src, sample("gpt-oss-mxfp4"), L, x, given, T, "bf16");
  for (DType id_type : {DType::I64, DType::I32}) {
    const std::string in = dir.file("x.safetensors"), out = dir.file("y.safetensors");
    In id_tensor = id_type == DType::I64 ? ints("topk_ids", DType::I64, {T, k}, ids)
                                         : ints("topk_ids", DType::I32, {T, k}, std::vector<int32_t>(ids.begin(), ids.end()));
    write_input(in, {f32("hidden_states", {T, H}, x), id_tensor, f32("topk_weights", {T, k}, w), f32("unrelated", {1}, {1.0f})});
    RunReport r = run_layer({art, in, out, std::nullopt});
    EXPECT_EQ(r.routing, "topk_ids");
    EXPECT_EQ(r.top_k, k);
    EXPECT_LE(rel_error(read_values<float>(out, "output"), ref), 1e-5);
    const std::vector<int32_t> got_ids = read_values<int32_t>(out, "topk_ids");
    EXPECT_EQ(std::vector<int64_t>(got_ids.begin(), got_ids.end()), ids);
    EXPECT_EQ(read_values<float>(out, "topk_weights"), w);
  }
}

// DeepSeek-V4's hash layers (num_hash_layers) route by token id through the gate's tid2eid
// table: the manifest names the table, `run` takes input_ids beside router_logits (and refuses
// without them), verify gives them seeded ids, and the routing is the table's rows.
TEST(Run, DeepSeekV4HashLayerRoutesByTokenIds) {
  test::TempDir dir;
  synth::SampleOptions so;
  so.layers = 2;
  so.hash_layers = 1;
  so.seed = 5;
  synth::write_sample("deepseek-v4-mxfp4", dir.file("src"), so);
  const std::string art = dir.file("a");
  convert_checkpoint(dir.file("src"), "sm90", art);
  ArtifactRuntime rt(art);
  ASSERT_EQ(rt.manifest().layers.size(), 2u);
  const artifact::Layer& hashed = rt.manifest().layers[0];
  ASSERT_TRUE(hashed.routing && hashed.routing->hash_table);
  EXPECT_EQ(*hashed.routing->hash_table, "layers.0.ffn.gate.tid2eid");
  EXPECT_FALSE(hashed.routing->correction_bias);
  EXPECT_FALSE(rt.manifest().layers[1].routing->hash_table);
  EXPECT_EQ(rt.hash_vocab(1), 0u);
  const uint64_t vocab = rt.hash_vocab(0), T = 3, H = hashed.hidden_size, E = hashed.num_experts, k = hashed.top_k;
  ASSERT_GT(vocab, 3u);
  const std::vector<int32_t> table = read_values<int32_t>(dir.file("src") + "/model.safetensors", "layers.0.ffn.gate.tid2eid");
  ASSERT_EQ(table.size(), vocab * k);

  const std::vector<int64_t> token_ids = {3, 0, static_cast<int64_t>(vocab - 1)};
  const std::string in = dir.file("x.safetensors"), out = dir.file("y.safetensors");
  write_input(in, {f32("hidden_states", {T, H}, seeded(T * H, 3)), f32("router_logits", {T, E}, seeded(T * E, 4)),
                   ints("input_ids", DType::I64, {T}, token_ids)});
  RunOptions ro{art, in, out, std::string("layers.0.ffn.experts")};
  RunReport r = run_layer(ro);
  EXPECT_EQ(r.routing, "router_logits");
  const std::vector<int32_t> got = read_values<int32_t>(out, "topk_ids");
  for (uint64_t t = 0; t < T; ++t)
    for (uint64_t j = 0; j < k; ++j) EXPECT_EQ(got[t * k + j], table[static_cast<size_t>(token_ids[t]) * k + j]) << "token " << t;

  // No input_ids, or one outside the table: bad input naming the tensor; nothing written.
  fs::remove(out);
  write_input(in, {f32("hidden_states", {T, H}, seeded(T * H, 3)), f32("router_logits", {T, E}, seeded(T * E, 4))});
  try {
    run_layer(ro);
    ADD_FAILURE() << "expected bad input";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 4);
    EXPECT_NE(std::string(e.what()).find("input_ids"), std::string::npos) << e.what();
  }
  write_input(in, {f32("hidden_states", {T, H}, seeded(T * H, 3)), f32("router_logits", {T, E}, seeded(T * E, 4)),
                   ints("input_ids", DType::I32, {T}, std::vector<int32_t>{0, 1, static_cast<int32_t>(vocab)})});
  EXPECT_THROW(run_layer(ro), Error);
  EXPECT_FALSE(fs::exists(out));

  // verify runs both layers against the source (the hash layer on seeded token ids).
  VerifyOptions vo;
  vo.artifact = art;
  vo.source = dir.file("src");
  EXPECT_TRUE(verify_artifact(vo).ok());
}

TEST(Run, InputsThatBreakTheContractAreBadInputAndWriteNothing) {
  test::TempDir dir;
  const std::string art = dir.file("a");
  convert_checkpoint(sample("gpt-oss-mxfp4"), "sm90", art);
  const uint64_t T = 2, H = 192, E = 4;
  const In x = f32("hidden_states", {T, H}, seeded(T * H, 1));
  const In logits = f32("router_logits", {T, E}, seeded(T * E, 2));
  const In ids = ints("topk_ids", DType::I32, {T, 2}, std::vector<int32_t>{0, 1, 2, 3});
  const In w = f32("topk_weights", {T, 2}, {0.5f, 0.5f, 0.5f, 0.5f});
  std::vector<float> nan_x = seeded(T * H, 1);
  nan_x[H + 5] = std::nanf("");
  std::vector<float> inf_logits = seeded(T * E, 2);
  inf_logits[3] = INFINITY;
  struct Bad {
    std::string what;
    std::vector<In> tensors;
    std::string tensor, rule;  // both must appear in the message
  };
  const std::vector<Bad> cases = {
      {"wrong hidden size", {f32("hidden_states", {T, 191}, seeded(T * 191, 1)), logits}, "hidden_states", "expected the layer's hidden size = 192"},
      {"1-D hidden states", {f32("hidden_states", {T * H}, seeded(T * H, 1)), logits}, "hidden_states", "is not 2-D"},
      {"integer hidden states", {ints("hidden_states", DType::I32, {T, H}, std::vector<int32_t>(T * H)), logits}, "hidden_states", "is not F32, BF16 or F16"},
      {"no tokens", {f32("hidden_states", {0, H}, {}), f32("router_logits", {0, E}, {})}, "hidden_states", "holds no tokens"},
      {"missing hidden states", {logits}, "hidden_states", "missing"},
      {"missing routing", {x}, "router_logits", "or topk_ids and topk_weights"},
      {"both routings", {x, logits, ids, w}, "router_logits", "not both"},
      {"ids without weights", {x, ids}, "topk_weights", "missing"},
      {"weights without ids", {x, w}, "topk_ids", "missing"},
      {"logits for other experts", {x, f32("router_logits", {T, 5}, seeded(T * 5, 2))}, "router_logits", "number of experts = 4"},
      {"logits for other tokens", {x, f32("router_logits", {3, E}, seeded(3 * E, 2))}, "router_logits", "hidden_states has 2"},
      {"id out of range", {x, ints("topk_ids", DType::I64, {T, 2}, std::vector<int64_t>{0, 1, 2, 4}), w}, "topk_ids", "id 4 at [1, 1] is not an expert"},
      {"negative id", {x, ints("topk_ids", DType::I32, {T, 2}, std::vector<int32_t>{0, -1, 2, 3}), w}, "topk_ids", "id -1 at [0, 1]"},
      {"repeated id", {x, ints("topk_ids", DType::I32, {T, 2}, std::vector<int32_t>{1, 1, 2, 3}), w}, "topk_ids", "appears twice for token 0"},
      {"too many per token", {x, ints("topk_ids", DType::I32, {T, 5}, std::vector<int32_t>(T * 5)), f32("topk_weights", {T, 5}, std::vector<float>(T * 5))},
       "topk_ids", "5 experts per token"},
      {"float ids", {x, f32("topk_ids", {T, 2}, {0, 1, 2, 3}), w}, "topk_ids", "is not I32 or I64"},
      {"weights of another k", {x, ids, f32("topk_weights", {T, 3}, std::vector<float>(T * 3))}, "topk_weights", "k of topk_ids = 2"},
      {"BF16 weights", {x, ids, bf16("topk_weights", {T, 2}, {0.5f, 0.5f, 0.5f, 0.5f})}, "topk_weights", "is not F32"},
      {"NaN hidden state", {f32("hidden_states", {T, H}, nan_x), logits}, "hidden_states", "NaN at [1, 5]"},
      {"infinite logit", {x, f32("router_logits", {T, E}, inf_logits)}, "router_logits", "an infinity at [0, 3]"},
      {"NaN weight", {x, ids, f32("topk_weights", {T, 2}, {0.5f, std::nanf(""), 0.5f, 0.5f})}, "topk_weights", "NaN at [0, 1]"},
  };
  for (const Bad& b : cases) {
    SCOPED_TRACE(b.what);
    const std::string in = dir.file("x.safetensors"), out = dir.file("y.safetensors");
    write_input(in, b.tensors);
    try {
      run_layer({art, in, out, std::nullopt});
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::bad_input) << e.what();
      const std::string msg = e.what();
      EXPECT_NE(msg.find(in), std::string::npos) << msg;
      EXPECT_NE(msg.find("`" + b.tensor + "`"), std::string::npos) << msg;
      EXPECT_NE(msg.find(b.rule), std::string::npos) << msg;
    }
    EXPECT_FALSE(fs::exists(out));
    EXPECT_FALSE(fs::exists(out + ".partial"));
  }
  // Not a safetensors file, and not an artifact.
  test::write_text(dir.file("junk"), "not a safetensors file");
  EXPECT_THROW(run_layer({art, dir.file("junk"), dir.file("y"), std::nullopt}), Error);
  try {
    run_layer({dir.path(), dir.file("junk"), dir.file("y"), std::nullopt});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::bad_input);
    EXPECT_NE(std::string(e.what()).find("not a moepack artifact"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir.file("y")));
}

TEST(Run, LayerIsPickedByPrefixAndRequiredWhenThereAreSeveral) {
  test::TempDir dir;
  synth::SampleOptions so;
  so.layers = 2;
  synth::write_sample("gpt-oss-mxfp4", dir.file("src"), so);
  const std::string art = dir.file("a");
  convert_checkpoint(dir.file("src"), "sm90", art);
  ArtifactRuntime rt(art);
  ASSERT_EQ(rt.manifest().layers.size(), 2u);
  const artifact::Layer& L = rt.manifest().layers[1];
  const uint64_t T = 2, H = L.hidden_size, E = L.num_experts;
  const std::string in = dir.file("x.safetensors");
  write_input(in, {f32("hidden_states", {T, H}, seeded(T * H, 3)), f32("router_logits", {T, E}, seeded(T * E, 4))});
  auto expect_usage = [&](std::optional<std::string> layer, const std::string& says) {
    try {
      run_layer({art, in, dir.file("y"), layer});
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::usage) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(rt.manifest().layers[0].prefix), std::string::npos) << "the message lists the layers: " << e.what();
    }
    EXPECT_FALSE(fs::exists(dir.file("y")));
  };
  expect_usage(std::nullopt, "pick one with --layer");
  expect_usage("model.layers.7.mlp.experts", "no MoE layer `model.layers.7.mlp.experts`");

  std::vector<std::vector<float>> outputs;
  for (const auto& layer : rt.manifest().layers) {
    RunReport r = run_layer({art, in, dir.file("y"), layer.prefix});
    EXPECT_EQ(r.layer, layer.prefix);
    outputs.push_back(read_values<float>(dir.file("y"), "output"));
    ckpt::Checkpoint src = ckpt::open_checkpoint(dir.file("src"));
    const std::vector<float> x = seeded(T * H, 3);
    const std::vector<float> ref = run_reference(src, dir.file("src"), layer, x, rt.route(rt.layer_index(layer.prefix), seeded(T * E, 4), T), T, "bf16");
    EXPECT_LE(rel_error(outputs.back(), ref), 1e-5) << layer.prefix;
  }
  EXPECT_NE(outputs[0], outputs[1]) << "the layers have different weights";
}

}  // namespace
}  // namespace moepack::runtime
