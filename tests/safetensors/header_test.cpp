// The upstream safetensors test suite (checkpoint-formats.md 1.5) and the extra probes (1.6),
// run against our reader; each case names the reference's error variant it must produce.
#include <gtest/gtest.h>

#include "formats/safetensors/header.h"
#include "support/test_support.h"

namespace moepack::st {
namespace {

using test::safetensors_bytes;

std::vector<uint8_t> zeros(size_t n) { return std::vector<uint8_t>(n, 0); }

Header parse(const std::vector<uint8_t>& bytes) { return parse_header(bytes, "probe.safetensors"); }

// Expects parse to fail with `rule`; returns the message for further checks.
std::string expect_rule(const std::vector<uint8_t>& bytes, Rule rule) {
  try {
    parse(bytes);
  } catch (const FormatError& e) {
    EXPECT_EQ(rule_name(e.rule()), rule_name(rule)) << e.what();
    EXPECT_EQ(e.exit_code(), 4);
    return e.what();
  }
  ADD_FAILURE() << "expected " << rule_name(rule) << ", the file was accepted";
  return "";
}

const std::string kTestJson = R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}})";

TEST(SafetensorsUpstream, Deserialization) {
  auto bytes = safetensors_bytes(kTestJson, zeros(16));
  ASSERT_EQ(bytes.size(), 84u);
  Header h = parse(bytes);
  ASSERT_EQ(h.tensors.size(), 1u);
  EXPECT_EQ(h.tensors[0].name, "test");
  EXPECT_EQ(h.tensors[0].dtype, DType::I32);
  EXPECT_EQ(h.tensors[0].shape, (std::vector<uint64_t>{2, 2}));
  EXPECT_EQ(h.tensors[0].num_bytes(), 16u);
  EXPECT_EQ(h.data_start(), 68u);
}

TEST(SafetensorsUpstream, EmptyShapesAllowed) {
  Header h = parse(safetensors_bytes(R"({"test":{"dtype":"I32","shape":[],"data_offsets":[0,4]}})", zeros(4)));
  EXPECT_TRUE(h.tensors[0].shape.empty());
  EXPECT_EQ(h.tensors[0].num_elements(), 1u);
}

TEST(SafetensorsUpstream, ZeroSizedTensor) {
  Header h = parse(safetensors_bytes(R"({"test":{"dtype":"I32","shape":[2,0],"data_offsets":[0, 0]}})", {}));
  EXPECT_EQ(h.tensors[0].num_bytes(), 0u);
}

TEST(SafetensorsUpstream, WhitespacePaddedHeader) {
  EXPECT_TRUE(parse(safetensors_bytes("{}\r \t\n", {})).tensors.empty());
  EXPECT_TRUE(parse(safetensors_bytes("\t\n{}\r ", {})).tensors.empty());
}

TEST(SafetensorsUpstream, JsonAttack) {
  std::string j = "{";
  for (int i = 0; i < 10; ++i) j += (i ? "," : "") + std::string("\"weight_") + std::to_string(i) + R"(":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})";
  j += "}";
  expect_rule(safetensors_bytes(j, zeros(16)), Rule::invalid_offset);
}

TEST(SafetensorsUpstream, MetadataIncompleteBuffer) {
  auto bytes = safetensors_bytes(kTestJson, zeros(16));
  std::string extra = "extra_bogus_data_for_polyglot_file";
  auto polyglot = bytes;
  polyglot.insert(polyglot.end(), extra.begin(), extra.end());
  expect_rule(polyglot, Rule::incomplete_buffer);
  expect_rule(safetensors_bytes(kTestJson, zeros(14)), Rule::incomplete_buffer);
}

TEST(SafetensorsUpstream, HeaderTooLarge) {
  auto bytes = safetensors_bytes(kTestJson, zeros(16));
  uint8_t prefix[8] = {0x3C, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF};
  std::copy(prefix, prefix + 8, bytes.begin());
  expect_rule(bytes, Rule::header_too_large);
}

TEST(SafetensorsUpstream, HeaderTooSmall) { expect_rule({}, Rule::header_too_small); }

TEST(SafetensorsUpstream, InvalidHeaderLength) {
  expect_rule({0x3C, 0, 0, 0, 0, 0, 0, 0}, Rule::invalid_header_length);
}

TEST(SafetensorsUpstream, InvalidHeaderNonUtf8) { expect_rule(safetensors_bytes("\xFF", {}), Rule::invalid_utf8); }

TEST(SafetensorsUpstream, InvalidHeaderNotJson) { expect_rule(safetensors_bytes("{", {}), Rule::invalid_json); }

TEST(SafetensorsUpstream, InvalidInfo) {
  expect_rule(safetensors_bytes(R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0, 4]}})", {}), Rule::tensor_invalid_info);
}

TEST(SafetensorsUpstream, ValidationOverflow) {
  auto a = safetensors_bytes(R"({"test":{"dtype":"I32","shape":[2,18446744073709551614],"data_offsets":[0,16]}})", zeros(16));
  ASSERT_EQ(a.size() - 16 - 8, 79u);
  expect_rule(a, Rule::validation_overflow);
  auto b = safetensors_bytes(R"({"test":{"dtype":"I32","shape":[2,9223372036854775807],"data_offsets":[0,16]}})", zeros(16));
  expect_rule(b, Rule::validation_overflow);
}

// --- extra probes (checkpoint-formats.md 1.6) ---

TEST(SafetensorsProbes, LengthPrefix) {
  expect_rule(zeros(7), Rule::header_too_small);
  expect_rule(std::vector<uint8_t>(8, 0xFF), Rule::header_too_large);
  expect_rule(safetensors_bytes(100'000'000, "{}", {}), Rule::invalid_header_length);  // limit inclusive
  expect_rule(safetensors_bytes(100'000'001, "{}", {}), Rule::header_too_large);
  expect_rule(safetensors_bytes(kTestJson.size() + 1, kTestJson, {}), Rule::invalid_header_length);
  expect_rule(zeros(8), Rule::invalid_json);  // N = 0
}

TEST(SafetensorsProbes, JsonShape) {
  expect_rule(safetensors_bytes("[]", {}), Rule::invalid_json);
  expect_rule(safetensors_bytes("null", {}), Rule::invalid_json);
  expect_rule(safetensors_bytes(std::string("{}\0\0", 4), {}), Rule::invalid_json);
  expect_rule(safetensors_bytes("{}\f", {}), Rule::invalid_json);
  EXPECT_NO_THROW(parse(safetensors_bytes("{}\t\t", {})));
  EXPECT_NO_THROW(parse(safetensors_bytes("      {}", {})));
  expect_rule(safetensors_bytes("\xEF\xBB\xBF{}", {}), Rule::invalid_json);
  expect_rule(safetensors_bytes("{\"a\xC3\x28\":1}", {}), Rule::invalid_utf8);
  expect_rule(safetensors_bytes("{/*c*/}", {}), Rule::invalid_json);
  expect_rule(safetensors_bytes(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},})", zeros(1)), Rule::invalid_json);
}

TEST(SafetensorsProbes, UnknownDtypes) {
  for (const char* d : {"F8_E4M3FN", "FP4", "f32", "NVFP4"})
    expect_rule(safetensors_bytes(std::string(R"({"a":{"dtype":")") + d + R"(","shape":[1],"data_offsets":[0,1]}})", zeros(1)), Rule::invalid_json);
}

TEST(SafetensorsProbes, AllDtypesAndSubByteSizes) {
  struct Case { const char* dtype; const char* shape; size_t bytes; };
  const Case ok[] = {{"F4", "[2]", 1}, {"F4", "[4,3]", 6}, {"F6_E2M3", "[4]", 3}, {"F6_E3M2", "[4]", 3},
                     {"F8_E8M0", "[4]", 4}, {"F8_E4M3", "[4]", 4}, {"F8_E5M2", "[4]", 4}, {"F8_E4M3FNUZ", "[1]", 1},
                     {"F8_E5M2FNUZ", "[1]", 1}, {"BOOL", "[3]", 3}, {"C64", "[1]", 8}, {"U8", "[1]", 1}, {"I8", "[1]", 1},
                     {"I16", "[1]", 2}, {"U16", "[1]", 2}, {"F16", "[1]", 2}, {"BF16", "[1]", 2}, {"I32", "[1]", 4},
                     {"U32", "[1]", 4}, {"F32", "[1]", 4}, {"F64", "[1]", 8}, {"I64", "[1]", 8}, {"U64", "[1]", 8}};
  for (const auto& c : ok) {
    std::string j = std::string(R"({"a":{"dtype":")") + c.dtype + R"(","shape":)" + c.shape + R"(,"data_offsets":[0,)" + std::to_string(c.bytes) + "]}}";
    EXPECT_NO_THROW(parse(safetensors_bytes(j, zeros(c.bytes)))) << c.dtype << c.shape;
  }
  expect_rule(safetensors_bytes(R"({"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", zeros(2)), Rule::misaligned_slice);
  expect_rule(safetensors_bytes(R"({"a":{"dtype":"F4","shape":[3,3],"data_offsets":[0,5]}})", zeros(5)), Rule::misaligned_slice);
  expect_rule(safetensors_bytes(R"({"a":{"dtype":"F6_E3M2","shape":[2],"data_offsets":[0,2]}})", zeros(2)), Rule::misaligned_slice);
}

TEST(SafetensorsProbes, Metadata) {
  expect_rule(safetensors_bytes(R"({"__metadata__":{"format":1}})", {}), Rule::invalid_json);
  expect_rule(safetensors_bytes(R"({"__metadata__":{"format":{"a":"b"}}})", {}), Rule::invalid_json);
  expect_rule(safetensors_bytes(R"({"__metadata__":"pt"})", {}), Rule::invalid_json);
  EXPECT_FALSE(parse(safetensors_bytes(R"({"__metadata__":null})", {})).has_metadata);
  EXPECT_TRUE(parse(safetensors_bytes(R"({"__metadata__":{}})", {})).metadata.empty());
  Header h = parse(safetensors_bytes(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"__metadata__":{"format":"pt"}})", zeros(1)));
  EXPECT_EQ(h.metadata.at("format"), "pt");
  expect_rule(safetensors_bytes(R"({"__metadata__":{},"__metadata__":{}})", {}), Rule::invalid_json);
  expect_rule(safetensors_bytes(R"({"__metadata__":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", zeros(4)), Rule::invalid_json);
}

TEST(SafetensorsProbes, DuplicatesAreRejected) {
  // Stricter than the reference, which keeps the last duplicate tensor name.
  std::string msg = expect_rule(safetensors_bytes(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", zeros(1)), Rule::invalid_json);
  EXPECT_NE(msg.find("duplicate tensor name `a`"), std::string::npos) << msg;
  expect_rule(safetensors_bytes(R"({"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}})", zeros(1)), Rule::invalid_json);
}

TEST(SafetensorsProbes, TensorObjectSchema) {
  EXPECT_NO_THROW(parse(safetensors_bytes(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"foo":1}})", zeros(1))));
  EXPECT_NO_THROW(parse(safetensors_bytes(R"({"a":{"foo":{"x":[1,{"y":2}]},"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", zeros(1))));
  expect_rule(safetensors_bytes(R"({"a":{"shape":[1],"data_offsets":[0,1]}})", zeros(1)), Rule::invalid_json);
  expect_rule(safetensors_bytes(R"({"a":{"dtype":"U8","data_offsets":[0,1]}})", zeros(1)), Rule::invalid_json);
  expect_rule(safetensors_bytes(R"({"a":{"dtype":"U8","shape":[1]}})", zeros(1)), Rule::invalid_json);
  expect_rule(safetensors_bytes(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", zeros(1)), Rule::invalid_json);
  expect_rule(safetensors_bytes(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}})", zeros(1)), Rule::invalid_json);
  for (const char* bad : {"[-1]", "[1.0]"})
    expect_rule(safetensors_bytes(std::string(R"({"a":{"dtype":"U8","shape":)") + bad + R"(,"data_offsets":[0,1]}})", zeros(1)), Rule::invalid_json);
  for (const char* bad : {"[1e0,1]", "[-1,1]", "[\"0\",1]", "[0,18446744073709551616]"})
    expect_rule(safetensors_bytes(std::string(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":)") + bad + "}}", zeros(1)), Rule::invalid_json);
  expect_rule(safetensors_bytes(R"({"a":[1,2]})", {}), Rule::invalid_json);
}

TEST(SafetensorsProbes, Offsets) {
  expect_rule(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})", zeros(12)), Rule::invalid_offset);
  expect_rule(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", zeros(12)), Rule::invalid_offset);
  expect_rule(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", zeros(8)), Rule::invalid_offset);
  expect_rule(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", zeros(4)), Rule::invalid_offset);
  // JSON order differs from offset order: fine, the reader sorts.
  Header h = parse(safetensors_bytes(R"({"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", zeros(2)));
  EXPECT_EQ(h.tensors[0].name, "a");
  // A zero-size tensor between two others, and an unaligned F32.
  EXPECT_NO_THROW(parse(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"z":{"dtype":"F32","shape":[4,0],"data_offsets":[4,4]},"c":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", zeros(8))));
  EXPECT_NO_THROW(parse(safetensors_bytes(R"({"u":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"f":{"dtype":"F32","shape":[1],"data_offsets":[1,5]}})", zeros(5))));
  expect_rule(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", zeros(4)), Rule::tensor_invalid_info);
  expect_rule(safetensors_bytes(R"({"a":{"dtype":"F32","shape":[1000000],"data_offsets":[0,4000000]}})", zeros(16)), Rule::incomplete_buffer);
  expect_rule(safetensors_bytes(R"({"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]}})", zeros(8)), Rule::validation_overflow);
}

TEST(SafetensorsProbes, Names) {
  Header h = parse(safetensors_bytes(R"({"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"é":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"\u0062":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}})", zeros(3)));
  EXPECT_EQ(h.tensors[0].name, "");
  EXPECT_EQ(h.tensors[1].name, "é");
  EXPECT_EQ(h.tensors[2].name, "b");
}

TEST(SafetensorsProbes, ResourceLimits) {
  std::string deep = R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":)" + std::string(100, '[') + std::string(100, ']') + "}}";
  expect_rule(safetensors_bytes(deep, zeros(1)), Rule::resource_limit);
  std::string shape = "[";
  for (int i = 0; i < 65; ++i) shape += (i ? ",1" : "1");
  shape += "]";
  expect_rule(safetensors_bytes(R"({"a":{"dtype":"U8","shape":)" + shape + R"(,"data_offsets":[0,1]}})", zeros(1)), Rule::resource_limit);
}

TEST(SafetensorsProbes, AbuseFileFromSafetensorsCpp) {
  // syoyo/safetensors-cpp abuse attempt 1: the prefix claims 1000 header bytes in an 88-byte file.
  auto bytes = safetensors_bytes(1000, std::string(80, ' '), {});
  ASSERT_EQ(bytes.size(), 88u);
  expect_rule(bytes, Rule::invalid_header_length);
}

TEST(SafetensorsProbes, MessagesNameFileTensorAndRule) {
  std::string msg = expect_rule(safetensors_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", zeros(4)), Rule::tensor_invalid_info);
  EXPECT_NE(msg.find("probe.safetensors"), std::string::npos);
  EXPECT_NE(msg.find("tensor `w`"), std::string::npos);
  EXPECT_NE(msg.find("invalid shape, data type, or offset"), std::string::npos);
}

}  // namespace
}  // namespace moepack::st
