// Golden files: round trips, and every refusal of the reader (exit 4, naming the file and rule)
// on frames and contents built by hand.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include <zstd.h>

#include "formats/artifact/golden.h"
#include "formats/safetensors/writer.h"
#include "lib/core/error.h"
#include "support/test_support.h"

namespace moepack::artifact {
namespace {
namespace fs = std::filesystem;

const std::string kHashA = "00112233445566778899aabbccddeeff";
const std::string kHashB = "ffeeddccbbaa99887766554433221100";

Golden sample_golden() {
  Golden g;
  g.moepack_version = "0.1.0";
  g.reference = "vllm e9d1398d9 (2026-08-22); triton_kernels v3.5.1; flashinfer 0.6.17";
  g.artifact = kHashA;
  g.seed = 7;
  g.tokens = 3;
  g.tensor_hashes = {{"model.layers.0.mlp.experts.w13_weight", kHashA}, {"model.layers.0.mlp.experts.w2_weight", kHashB}};
  GoldenTensor out{"model.layers.0.mlp.experts.output", DType::F32, {3, 2}, {}};
  for (int i = 0; i < 6; ++i) {
    float v = 0.25f * static_cast<float>(i) - 0.5f;
    uint8_t b[4];
    std::memcpy(b, &v, 4);
    out.bytes.insert(out.bytes.end(), b, b + 4);
  }
  GoldenTensor input{"input", DType::BF16, {3, 1}, {0x80, 0x3F, 0x00, 0x40, 0x40, 0x40}};
  // Given out of order: the file keeps the reference writer's order (dtype descending, then name).
  g.outputs = {input, out};
  return g;
}

// One zstd frame around `content`, with or without the checksum and the declared size.
std::vector<uint8_t> frame(std::span<const uint8_t> content, bool checksum = true, bool content_size = true, int level = 3) {
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, checksum ? 1 : 0);
  ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, content_size ? 1 : 0);
  std::vector<uint8_t> out(ZSTD_compressBound(content.size()));
  size_t n;
  if (content_size) {
    n = ZSTD_compress2(c, out.data(), out.size(), content.data(), content.size());
  } else {
    // Streaming without a pledged size: the frame header then carries no content size.
    ZSTD_inBuffer in{content.data(), content.size(), 0};
    ZSTD_outBuffer o{out.data(), out.size(), 0};
    n = ZSTD_compressStream2(c, &o, &in, ZSTD_e_end);
    n = ZSTD_isError(n) ? n : o.pos;
  }
  ZSTD_freeCCtx(c);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

// A golden-shaped safetensors file with the given metadata and one F32 tensor.
std::vector<uint8_t> safetensors_with(const std::map<std::string, std::string>& metadata) {
  std::vector<st::TensorSpec> specs = {{"out", DType::F32, {2}}};
  std::vector<uint8_t> file = st::build_header(specs, metadata, "test");
  file.resize(file.size() + 8, 0);
  return file;
}

std::map<std::string, std::string> good_metadata() {
  return {{"format", "moepack-golden/1"}, {"moepack_version", "0.1.0"}, {"reference", "r"}, {"artifact", kHashA},
          {"seed", "0"},                 {"tokens", "16"},            {"tensor_hashes", "{\"t\":\"" + kHashB + "\"}"}};
}

// The refusal message for `bytes`, checking it is a bad-input error naming the file.
std::string refusal(std::span<const uint8_t> bytes, uint64_t limit = kDefaultMaxGoldenBytes) {
  try {
    (void)decode_golden(bytes, "pinned.golden", limit);
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 4) << e.what();
    EXPECT_NE(std::string(e.what()).find("pinned.golden"), std::string::npos) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

TEST(Golden, RoundTripThroughBytesAndFile) {
  const Golden g = sample_golden();
  const std::vector<uint8_t> bytes = encode_golden(g);
  Golden back = decode_golden(bytes, "mem");
  EXPECT_EQ(back.outputs.at(0).name, "model.layers.0.mlp.experts.output");  // F32 sorts before BF16
  EXPECT_EQ(back.outputs.at(1).name, "input");
  Golden expected = g;
  std::swap(expected.outputs[0], expected.outputs[1]);
  EXPECT_EQ(back, expected);
  EXPECT_EQ(encode_golden(back), bytes) << "same contents, same bytes";

  test::TempDir dir;
  const std::string path = dir.file("layer0.golden");
  write_golden(path, g);
  EXPECT_FALSE(fs::exists(path + ".partial"));
  EXPECT_EQ(read_golden(path), expected);
}

TEST(Golden, InsideIsASafetensorsFileWithTheMetadata) {
  const std::vector<uint8_t> bytes = encode_golden(sample_golden());
  std::vector<uint8_t> inner(static_cast<size_t>(ZSTD_getFrameContentSize(bytes.data(), bytes.size())));
  ASSERT_EQ(ZSTD_decompress(inner.data(), inner.size(), bytes.data(), bytes.size()), inner.size());
  const std::string text(inner.begin(), inner.end());
  EXPECT_NE(text.find("\"format\":\"moepack-golden/1\""), std::string::npos);
  EXPECT_NE(text.find("\"seed\":\"7\""), std::string::npos);
  EXPECT_NE(text.find("\"tokens\":\"3\""), std::string::npos);
}

TEST(Golden, FrameRefusals) {
  const std::vector<uint8_t> inner = safetensors_with(good_metadata());
  EXPECT_NO_THROW((void)decode_golden(frame(inner), "ok"));
  EXPECT_NE(refusal(inner).find("not a zstd frame"), std::string::npos);
  EXPECT_NE(refusal(std::vector<uint8_t>{}).find("not a zstd frame"), std::string::npos);
  EXPECT_NE(refusal(frame(inner, false)).find("no content checksum"), std::string::npos);
  std::vector<uint8_t> trailing = frame(inner);
  trailing.push_back(0);
  EXPECT_NE(refusal(trailing).find("1 bytes after the zstd frame"), std::string::npos);
  std::vector<uint8_t> two = frame(inner), second = frame(inner);
  two.insert(two.end(), second.begin(), second.end());
  EXPECT_NE(refusal(two).find("bytes after the zstd frame"), std::string::npos);
  std::vector<uint8_t> cut = frame(inner);
  cut.resize(cut.size() - 3);
  EXPECT_NE(refusal(cut).find("truncated or corrupt"), std::string::npos);
  std::vector<uint8_t> flipped = frame(inner, true, true, 1);
  flipped[flipped.size() - 6] ^= 0x55;  // inside the last block or the checksum
  EXPECT_NE(refusal(flipped).find("corrupt"), std::string::npos);
}

TEST(Golden, DecompressedSizeIsBoundedBeforeAllocating) {
  // 64 MiB of zeros compress to a few kB: a bomb for a reader that trusts the frame.
  std::vector<uint8_t> zeros(64u << 20, 0);
  const std::vector<uint8_t> declared = frame(zeros);
  const std::vector<uint8_t> undeclared = frame(zeros, true, false);
  EXPECT_LT(declared.size(), 64u << 10);
  EXPECT_NE(refusal(declared, 1u << 20).find("declares 67108864 bytes, above the 1048576-byte limit"), std::string::npos);
  EXPECT_NE(refusal(undeclared, 1u << 20).find("inflates past the 1048576-byte limit"), std::string::npos);
  // Within the limit, an undeclared size reads fine (and then fails as safetensors: zeros).
  EXPECT_NE(refusal(frame(std::vector<uint8_t>(100, 0), true, false)).find("pinned.golden"), std::string::npos);
}

TEST(Golden, MetadataRefusals) {
  auto with = [](const std::string& key, const std::string& value) {
    auto m = good_metadata();
    m[key] = value;
    return frame(safetensors_with(m));
  };
  auto without = [](const std::string& key) {
    auto m = good_metadata();
    m.erase(key);
    return frame(safetensors_with(m));
  };
  EXPECT_NE(refusal(with("format", "moepack-golden/2")).find("format is `moepack-golden/2`"), std::string::npos);
  EXPECT_NE(refusal(without("tokens")).find("metadata `tokens` is missing"), std::string::npos);
  EXPECT_NE(refusal(with("colour", "blue")).find("unknown metadata key `colour`"), std::string::npos);
  EXPECT_NE(refusal(with("artifact", "00112233")).find("`artifact` is not 32 lowercase hex digits"), std::string::npos);
  EXPECT_NE(refusal(with("artifact", "00112233445566778899AABBCCDDEEFF")).find("`artifact`"), std::string::npos);
  for (const char* seed : {"", "01", "-1", "+1", "1.0", "18446744073709551616", " 1"})
    EXPECT_NE(refusal(with("seed", seed)).find("`seed` is not a decimal integer"), std::string::npos) << seed;
  EXPECT_EQ(decode_golden(with("seed", "18446744073709551615"), "max").seed, UINT64_MAX);
  EXPECT_NE(refusal(with("tensor_hashes", "[]")).find("not a JSON object"), std::string::npos);
  EXPECT_NE(refusal(with("tensor_hashes", "{\"t\":1}")).find("not 32 lowercase hex digits"), std::string::npos);
  EXPECT_NE(refusal(with("tensor_hashes", "{\"t\":\"" + kHashA + "\",\"t\":\"" + kHashB + "\"}")).find("duplicate"), std::string::npos);
  EXPECT_NE(refusal(with("tensor_hashes", "{")).find("tensor_hashes"), std::string::npos);
  EXPECT_NE(refusal(frame(safetensors_with({}))).find("no __metadata__"), std::string::npos);
}

TEST(Golden, TheInsideMustBeAValidSafetensorsFile) {
  std::vector<uint8_t> inner = safetensors_with(good_metadata());
  inner.pop_back();  // the data region no longer covers the tensor
  EXPECT_NE(refusal(frame(inner)).find("pinned.golden"), std::string::npos);
}

TEST(Golden, WriterRefusesContentsNoReaderWouldAccept) {
  Golden g = sample_golden();
  g.artifact = "not-a-hash";
  EXPECT_THROW((void)encode_golden(g), Error);
  g = sample_golden();
  g.outputs.push_back(g.outputs[0]);
  EXPECT_THROW((void)encode_golden(g), Error);
  g = sample_golden();
  g.outputs[0].bytes.pop_back();
  EXPECT_THROW((void)encode_golden(g), Error);
}

}  // namespace
}  // namespace moepack::artifact
