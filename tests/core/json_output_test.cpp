// lib/core/json_output: the serializer every --json document goes through never throws for a
// string's bytes, and changes nothing but invalid UTF-8.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "lib/core/json_output.h"

namespace moepack {
namespace {

const std::string kReplacement = "\xef\xbf\xbd";  // U+FFFD

TEST(JsonOutput, InvalidUtf8BecomesReplacementCharacters) {
  const std::string message = std::string("last read: '4]}}") + "\xe2" + "'; byte \xa0 and cut \xe2\x80";
  ASSERT_THROW(nlohmann::json(message).dump(), nlohmann::json::type_error);  // what the CLI used to do
  const std::string text = safe_json_text(nlohmann::json{{"message", message}});
  const nlohmann::json back = nlohmann::json::parse(text);
  EXPECT_EQ(back["message"], "last read: '4]}}" + kReplacement + "'; byte " + kReplacement + " and cut " + kReplacement);
  EXPECT_EQ(nlohmann::ordered_json::parse(safe_json_text(nlohmann::ordered_json{{"m", message}}, -1))["m"].get<std::string>(), back["message"].get<std::string>());
}

TEST(JsonOutput, ValidTextIsUnchanged) {
  const nlohmann::json document = {{"text", "gpt-oss \xe2\x80\xa8 caf\xc3\xa9 \xf0\x9f\x98\x80"}, {"n", 3}};
  EXPECT_EQ(safe_json_text(document), document.dump(2));
  EXPECT_EQ(safe_json_text(document, -1), document.dump());
}

TEST(JsonOutput, ErrorObjectHasKindExitCodeAndMessage) {
  const nlohmann::json j = error_json(ErrorKind::bad_input, "f.safetensors: bad");
  EXPECT_EQ(j, (nlohmann::json{{"error", {{"kind", "bad_input"}, {"exit_code", 4}, {"message", "f.safetensors: bad"}}}}));
  EXPECT_EQ(std::string(error_kind_name(ErrorKind::io)), "io");
  EXPECT_EQ(error_json(ErrorKind::internal, "x")["error"]["exit_code"], 1);
}

}  // namespace
}  // namespace moepack
