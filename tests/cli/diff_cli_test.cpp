// `moepack diff` through the binary: identical conversions exit 0, differences exit 5 and are
// listed (tensors, manifest paths, other files), a flipped byte is found at its exact offset,
// checkpoints compare with checkpoints and artifacts, and the --json shape of moepack-diff(1).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "formats/safetensors/file.h"
#include "lib/core/codecs.h"
#include "support/test_support.h"

namespace moepack::test {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

const std::string kLayer = "model.layers.0.mlp.experts";

std::string convert(const TempDir& dir, const std::string& name, const std::string& sample, const std::string& target, int tp = 1) {
  const std::string out = dir.file(name);
  std::vector<std::string> args = {"convert", source_dir() + "/samples/" + sample, "--target", target, "-o", out, "-q"};
  if (tp > 1) args.insert(args.end(), {"--tp", std::to_string(tp)});
  CommandResult r = run_moepack(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

// XORs `mask` into byte `offset` of tensor `name`'s data in `file`; returns the bytes before and after.
std::pair<std::vector<uint8_t>, std::vector<uint8_t>> flip(const std::string& file, const std::string& name, uint64_t offset, uint8_t mask) {
  uint64_t at = 0, size = 0;
  std::vector<uint8_t> before;
  {
    st::File f(file);
    const st::TensorInfo* t = f.find(name);
    EXPECT_NE(t, nullptr) << name;
    if (!t) return {};
    at = f.header().data_start() + t->begin;
    size = t->num_bytes();
    before = f.read_all(*t);
  }
  std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
  io.seekg(static_cast<std::streamoff>(at + offset));
  char c = 0;
  io.read(&c, 1);
  c = static_cast<char>(c ^ mask);
  io.seekp(static_cast<std::streamoff>(at + offset));
  io.write(&c, 1);
  io.close();
  std::vector<uint8_t> after = before;
  after[offset] ^= mask;
  EXPECT_LT(offset, size);
  return {before, after};
}

json diff_json(const std::string& a, const std::string& b, int expected_exit) {
  CommandResult r = run_moepack({"diff", a, b, "--json"});
  EXPECT_EQ(r.exit_code, expected_exit) << r.out << r.err;
  return json::parse(r.out);
}

const json* find_named(const json& arr, const std::string& key, const std::string& value) {
  for (const auto& e : arr)
    if (e[key] == value) return &e;
  return nullptr;
}

TEST(DiffCli, TheSameConversionTwiceIsIdentical) {
  TempDir dir;
  const std::string a1 = convert(dir, "a1", "gpt-oss-mxfp4", "sm90"), a2 = convert(dir, "a2", "gpt-oss-mxfp4", "sm90");
  CommandResult text = run_moepack({"diff", a1, a2});
  EXPECT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_NE(text.out.find("\nidentical\n"), std::string::npos) << text.out;
  EXPECT_EQ(text.err, "");
  json doc = diff_json(a1, a2, 0);
  EXPECT_TRUE(doc["identical"].get<bool>());
  EXPECT_EQ(doc["a"]["kind"], "artifact");
  EXPECT_EQ(doc["b"]["path"], a2);
  EXPECT_EQ(doc["tensors"]["compared"], doc["a"]["tensors"]);
  EXPECT_EQ(doc["tensors"]["identical"], doc["tensors"]["compared"]);
  EXPECT_TRUE(doc["tensors"]["different"].empty());
  EXPECT_TRUE(doc["manifest"]["differences"].empty());
  EXPECT_TRUE(doc["files"]["different"].empty());

  // Several ranks: packed tensors are keyed per rank.
  const std::string t1 = convert(dir, "t1", "quark-w-mxfp4", "sm90", 2), t2 = convert(dir, "t2", "quark-w-mxfp4", "sm90", 2);
  json tp = diff_json(t1, t2, 0);
  EXPECT_TRUE(tp["identical"].get<bool>());
  const std::string one = convert(dir, "t0", "quark-w-mxfp4", "sm90");
  json ranks = diff_json(t1, one, 5);
  EXPECT_NE(find_named(ranks["tensors"]["only_in_a"], "name", kLayer + ".w13_weight@rank1"), nullptr) << ranks["tensors"].dump(1);
  EXPECT_NE(find_named(ranks["tensors"]["only_in_b"], "name", kLayer + ".w13_weight"), nullptr) << ranks["tensors"].dump(1);
  EXPECT_NE(find_named(ranks["manifest"]["differences"], "path", "target.tp_size"), nullptr);
  EXPECT_NE(find_named(ranks["manifest"]["differences"], "path", "layers[" + kLayer + "].ranks[1]"), nullptr) << "rank 1 only in A";
}

TEST(DiffCli, DifferentTargetsAreListed) {
  TempDir dir;
  const std::string gpu = convert(dir, "gpu", "gpt-oss-mxfp4", "sm90"), cpu = convert(dir, "cpu", "gpt-oss-mxfp4", "cpu-amx");
  CommandResult text = run_moepack({"diff", gpu, cpu});
  EXPECT_EQ(text.exit_code, 5) << text.err;
  EXPECT_NE(text.out.find("layers[" + kLayer + "].backend: \"TRITON\" vs \"CPU\""), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("\ndifferent\n"), std::string::npos) << text.out;
  json doc = diff_json(gpu, cpu, 5);
  EXPECT_FALSE(doc["identical"].get<bool>());
  const json* w13 = find_named(doc["tensors"]["different"], "name", kLayer + ".w13_weight");
  ASSERT_NE(w13, nullptr) << doc["tensors"].dump(1);
  EXPECT_TRUE((*w13)["shape_differs"].get<bool>());
  EXPECT_FALSE((*w13)["dtype_differs"].get<bool>());
  EXPECT_EQ((*w13)["a"]["dtype"], "U8");
  EXPECT_TRUE((*w13)["max_abs_diff"].is_null()) << "packed bytes have no values";
  EXPECT_EQ(find_named(doc["tensors"]["different"], "name", "lm_head.weight"), nullptr) << "pass-through tensors are the same";
  EXPECT_EQ(doc["tensors"]["different"].size(), 4u) << "w13/w2 weights and scales; the biases are the same F32 bytes";
  const json* backend = find_named(doc["manifest"]["differences"], "path", "layers[" + kLayer + "].backend");
  ASSERT_NE(backend, nullptr);
  EXPECT_EQ((*backend)["a"], "TRITON");
  EXPECT_EQ((*backend)["b"], "CPU");
  EXPECT_TRUE((*backend)["in_a"].get<bool>());
  const json* layout = find_named(doc["manifest"]["differences"], "path", "layers[" + kLayer + "].ranks[0].tensors.w13_weight.layout");
  ASSERT_NE(layout, nullptr);
  EXPECT_EQ((*layout)["a"], "triton_kernels.HopperMXValue(mx_axis=1,v3.5.1)");
  EXPECT_NE(find_named(doc["manifest"]["differences"], "path", "layers[" + kLayer + "].ranks[0].tensors.w13_weight.xxh3"), nullptr);
  EXPECT_NE(find_named(doc["manifest"]["differences"], "path", "target.device"), nullptr);
}

TEST(DiffCli, AFlippedByteIsFoundAtItsOffset) {
  TempDir dir;
  const std::string a = convert(dir, "a", "gpt-oss-mxfp4", "sm90");
  const std::string b = dir.file("b");
  fs::copy(a, b, fs::copy_options::recursive);
  flip(b + "/model.safetensors", kLayer + ".w13_weight", 1234, 0x40);
  auto [before, after] = flip(b + "/model.safetensors", kLayer + ".w13_bias", 42, 0x21);  // element 10, byte 2
  float va, vb;
  std::memcpy(&va, before.data() + 40, 4);
  std::memcpy(&vb, after.data() + 40, 4);

  json doc = diff_json(a, b, 5);
  EXPECT_EQ(doc["tensors"]["different"].size(), 2u);
  const json* w13 = find_named(doc["tensors"]["different"], "name", kLayer + ".w13_weight");
  ASSERT_NE(w13, nullptr);
  EXPECT_EQ((*w13)["first_diff_byte"], 1234);
  EXPECT_EQ((*w13)["differing_bytes"], 1);
  EXPECT_FALSE((*w13)["values_compared"].get<bool>());
  const json* bias = find_named(doc["tensors"]["different"], "name", kLayer + ".w13_bias");
  ASSERT_NE(bias, nullptr);
  EXPECT_EQ((*bias)["first_diff_byte"], 42);
  EXPECT_EQ((*bias)["first_diff_element"], 10);
  EXPECT_EQ((*bias)["differing_elements"], 1);
  EXPECT_DOUBLE_EQ((*bias)["max_abs_diff"].get<double>(), std::fabs(static_cast<double>(va) - vb));
  EXPECT_TRUE(doc["manifest"]["differences"].empty()) << "only the data changed";

  CommandResult text = run_moepack({"diff", a, b});
  EXPECT_EQ(text.exit_code, 5);
  EXPECT_NE(text.out.find("1 bytes differ, the first at byte 1234 of the tensor"), std::string::npos) << text.out;
}

TEST(DiffCli, CheckpointsWithCheckpointsAndWithArtifacts) {
  TempDir dir;
  const std::string src = source_dir() + "/samples/gpt-oss-mxfp4";
  json same = diff_json(src, src, 0);
  EXPECT_EQ(same["a"]["kind"], "checkpoint");
  EXPECT_EQ(same["a"]["safetensors_files"], 3);
  EXPECT_TRUE(same["manifest"].is_null());

  const std::string copy = dir.file("copy");
  fs::copy(src, copy, fs::copy_options::recursive);
  const std::string name = kLayer + ".gate_up_proj_bias";
  std::string shard;
  {
    st::ShardSet set(copy);
    shard = set.find(name)->file->path();
  }
  auto [before, after] = flip(shard, name, 7, 0x01);  // the high byte of BF16 element 3
  {
    std::ofstream cfg(copy + "/config.json", std::ios::app);
    cfg << "\n";
  }
  json doc = diff_json(src, copy, 5);
  ASSERT_EQ(doc["tensors"]["different"].size(), 1u);
  const json& d = doc["tensors"]["different"][0];
  EXPECT_EQ(d["name"], name);
  EXPECT_EQ(d["a"]["dtype"], "BF16");
  EXPECT_EQ(d["first_diff_byte"], 7);
  EXPECT_EQ(d["first_diff_element"], 3);
  const double expected = std::fabs(static_cast<double>(bf16_to_float(static_cast<uint16_t>(before[6] | (before[7] << 8)))) -
                                    bf16_to_float(static_cast<uint16_t>(after[6] | (after[7] << 8))));
  EXPECT_DOUBLE_EQ(d["max_abs_diff"].get<double>(), expected);
  const json* cfg = find_named(doc["files"]["different"], "name", "config.json");
  ASSERT_NE(cfg, nullptr) << doc["files"].dump();
  EXPECT_EQ((*cfg)["first_diff_byte"], (*cfg)["a_bytes"]) << "the copy only grew";
  EXPECT_EQ((*cfg)["b_bytes"].get<uint64_t>(), (*cfg)["a_bytes"].get<uint64_t>() + 1);

  // A single file is a checkpoint too.
  json file = diff_json(shard, shard, 0);
  EXPECT_EQ(file["a"]["safetensors_files"], 1);

  // Checkpoint and artifact: the packed tensors replace the source's experts, the rest is kept.
  const std::string art = convert(dir, "a", "gpt-oss-mxfp4", "sm90");
  json mixed = diff_json(src, art, 5);
  EXPECT_EQ(mixed["b"]["kind"], "artifact");
  EXPECT_TRUE(mixed["manifest"].is_null());
  EXPECT_NE(find_named(mixed["tensors"]["only_in_a"], "name", kLayer + ".gate_up_proj_blocks"), nullptr);
  EXPECT_NE(find_named(mixed["tensors"]["only_in_b"], "name", kLayer + ".w13_weight"), nullptr);
  EXPECT_TRUE(mixed["tensors"]["different"].empty()) << "pass-through tensors are copied unchanged";
  EXPECT_GT(mixed["tensors"]["identical"].get<int>(), 0);
}

TEST(DiffCli, BadInputAndUsage) {
  TempDir dir;
  CommandResult missing = run_moepack({"diff", dir.file("nope"), dir.path(), "--json"});
  EXPECT_EQ(missing.exit_code, 4) << missing.err;
  EXPECT_EQ(json::parse(missing.out)["error"]["kind"], "bad_input");
  write_text(dir.file("bad.safetensors"), "not safetensors");
  CommandResult bad = run_moepack({"diff", dir.file("bad.safetensors"), dir.file("bad.safetensors")});
  EXPECT_EQ(bad.exit_code, 4) << bad.err;
  EXPECT_NE(bad.err.find("bad.safetensors"), std::string::npos) << bad.err;
  EXPECT_EQ(run_moepack({"diff", dir.path()}).exit_code, 2);
}

}  // namespace
}  // namespace moepack::test
