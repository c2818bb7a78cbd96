// `--json` runs whose messages quote bytes that are not UTF-8 (a header parse error's "last
// read" excerpt can stop inside a multi-byte character; a path can hold any byte). docs/CLI.md: the
// error goes to stderr as `moepack: error: <what>`, stdout still gets one JSON document with an
// "error" object, and bad input is exit 4. Before lib/core/json_output these runs aborted
// (nlohmann type_error 316 thrown inside the error handler).
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace moepack::test {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

const std::string kValidHeader = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";

// A single-tensor safetensors file whose header is kValidHeader followed by `padding`, with the
// declared length covering the padding (the shape a writer padding to 8 bytes produces).
std::vector<uint8_t> padded_file(const std::string& padding) { return safetensors_bytes(kValidHeader + padding, std::vector<uint8_t>(4, 0)); }

// What survives the replacement of invalid UTF-8 by U+FFFD: the ASCII bytes, in order.
std::string ascii_only(const std::string& text) {
  std::string out;
  for (char c : text)
    if (static_cast<unsigned char>(c) < 0x80) out += c;
  return out;
}

// The three commands that read a checkpoint, each with --json.
std::vector<std::vector<std::string>> json_commands(const std::string& checkpoint, const std::string& output) {
  return {{"inspect", checkpoint, "--json"},
          {"plan", checkpoint, "--target", "sm90", "--json"},
          {"convert", checkpoint, "--target", "sm90", "-o", output, "--json"}};
}

// Exit 4, the message on stderr, and the same message (up to replaced bytes) in the "error"
// object of the one JSON document on stdout.
void expect_bad_input_reported_twice(const std::vector<std::string>& args, const std::string& named_file, const std::string& rule) {
  SCOPED_TRACE(args.front());
  const CommandResult r = run_moepack(args);
  EXPECT_EQ(r.exit_code, 4) << r.err;
  const std::string prefix = "moepack: error: ";
  ASSERT_EQ(r.err.rfind(prefix, 0), 0u) << r.err;
  ASSERT_FALSE(r.err.empty());
  const std::string stderr_message = r.err.substr(prefix.size(), r.err.size() - prefix.size() - 1);
  EXPECT_NE(stderr_message.find(named_file), std::string::npos) << r.err;
  EXPECT_NE(stderr_message.find(rule), std::string::npos) << r.err;
  json document;
  ASSERT_NO_THROW(document = json::parse(r.out)) << r.out;
  ASSERT_TRUE(document.contains("error") && document["error"].is_object()) << r.out;
  EXPECT_EQ(document["error"]["kind"], "bad_input");
  EXPECT_EQ(document["error"]["exit_code"], 4);
  ASSERT_TRUE(document["error"]["message"].is_string());
  EXPECT_EQ(ascii_only(document["error"]["message"].get<std::string>()), ascii_only(stderr_message));
}

struct BadFile {
  std::string name;
  std::vector<uint8_t> bytes;
  std::string rule;  // a part of the reader's message
};

std::vector<BadFile> bad_files() {
  const std::string bad_name_header = R"({"w)" + std::string("\xff\xfe", 2) + R"(":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  return {
      // A non-breaking space as a raw Latin-1 byte after the JSON object.
      {"latin1_nbsp_padding", padded_file("\xa0"), "invalid UTF-8 in header"},
      // U+2028 is valid UTF-8 but not JSON whitespace; the parse error quotes only its first byte.
      {"u2028_padding", padded_file("\xe2\x80\xa8"), "invalid JSON in header"},
      // The first two bytes of a three-byte sequence, then the end of the header.
      {"truncated_multibyte_padding", padded_file("\xe2\x80"), "invalid UTF-8 in header"},
      // A valid character where a value must start: "last read" ends inside it.
      {"multibyte_where_a_value_starts", safetensors_bytes(R"({"a":)" + std::string("\xc3\xa9") + "}", {}), "invalid JSON in header"},
      {"tensor_name_not_utf8", safetensors_bytes(bad_name_header, std::vector<uint8_t>(4, 0)), "header"},
  };
}

TEST(JsonErrors, InvalidUtf8InReaderMessagesStillGivesOneJsonDocument) {
  for (const BadFile& bad : bad_files()) {
    SCOPED_TRACE(bad.name);
    TempDir tmp;
    const std::string file = tmp.file(bad.name + ".safetensors");
    write_file(file, bad.bytes);
    for (const auto& args : json_commands(file, tmp.file("out"))) expect_bad_input_reported_twice(args, file, bad.rule);
    EXPECT_FALSE(fs::exists(tmp.file("out")));
  }
}

// config.json is valid UTF-8 but not JSON; its parse error quotes half of the character.
TEST(JsonErrors, ConfigParseErrorQuotingHalfACharacter) {
  TempDir tmp;
  for (const auto& e : fs::directory_iterator(source_dir() + "/samples/gpt-oss-mxfp4")) fs::copy(e.path(), tmp.path() + "/" + e.path().filename().string());
  write_text(tmp.file("config.json"), "{\"model_type\": \"gpt_oss\", \"hidden_size\": \xc3\xa9}");
  for (const auto& args : json_commands(tmp.path(), tmp.path() + "-out")) expect_bad_input_reported_twice(args, tmp.file("config.json"), "invalid JSON");
}

// A checkpoint and an output directory whose names are not UTF-8: the runs succeed, and the
// documents naming them are valid JSON with the bytes replaced.
TEST(JsonErrors, PathsThatAreNotUtf8SucceedWithValidJson) {
  TempDir tmp;
  const std::string odd = std::string("\xff\xa0-") + "\xe2\x80";
  const std::string checkpoint = tmp.file("ckpt" + odd);
  fs::copy(source_dir() + "/samples/gpt-oss-mxfp4", checkpoint);
  const CommandResult inspect = run_moepack({"inspect", checkpoint, "--json"});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  const json described = json::parse(inspect.out);
  EXPECT_EQ(ascii_only(described["path"].get<std::string>()), ascii_only(checkpoint));
  EXPECT_NE(described["path"].get<std::string>().find("\xef\xbf\xbd"), std::string::npos) << "U+FFFD where the bytes were";

  const std::string output = tmp.file("out" + odd);
  const CommandResult convert = run_moepack({"convert", checkpoint, "--target", "sm90", "-o", output, "--json"});
  ASSERT_EQ(convert.exit_code, 0) << convert.err;
  EXPECT_EQ(ascii_only(json::parse(convert.out)["output"].get<std::string>()), ascii_only(output));
  EXPECT_TRUE(fs::is_directory(output));

  // The same path failing: the error document is valid too, and stderr keeps the raw bytes.
  const CommandResult missing = run_moepack({"inspect", checkpoint + "-missing", "--json"});
  EXPECT_EQ(missing.exit_code, 4);
  EXPECT_NE(missing.err.find(checkpoint + "-missing"), std::string::npos) << missing.err;
  EXPECT_EQ(json::parse(missing.out)["error"]["exit_code"], 4);
}

}  // namespace
}  // namespace moepack::test
