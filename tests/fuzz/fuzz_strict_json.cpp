// parse_strict_json, the parser of every JSON file from a stranger (config.json,
// hf_quant_config.json, index, manifests). An accepted document must survive a round trip:
// what it serializes to parses again, strictly, to the same value.
// fuzz-links: moepack_safetensors
#include "formats/safetensors/strict_json.h"
#include "fuzz/fuzz_target.h"

MOEPACK_FUZZ_TARGET(strict_json) {
  using namespace moepack;
  constexpr const char* kPath = "fuzz.json";
  nlohmann::json doc;
  std::string error;
  if (!fuzz::expect_input_error([&] { doc = parse_strict_json(std::span<const uint8_t>(data, size), kPath); }, &error)) {
    MOEPACK_FUZZ_CHECK(error.find(kPath) != std::string::npos, "message does not name the file: " + error);
    return;
  }
  std::string text = doc.dump();
  nlohmann::json again;
  bool ok = fuzz::expect_input_error([&] { again = parse_strict_json(text, kPath); }, &error);
  MOEPACK_FUZZ_CHECK(ok, "a serialized document is refused: " + error);
  MOEPACK_FUZZ_CHECK(again == doc, "the round trip changed the document");
}
