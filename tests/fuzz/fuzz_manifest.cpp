// The artifact manifest reader (moepack.json from someone else's artifact): parse_strict_json,
// then artifact::manifest_from_json. Beyond "no crash": a refusal names the file; an accepted
// manifest is read faithfully — everything to_json writes back is found, with the same value,
// in the input document (a number narrowed on the way in, a rank wrapped to int, would differ)
// — and survives a round trip (serialize, parse strictly, read again) unchanged.
// fuzz-links: moepack_artifact
#include "formats/artifact/manifest.h"
#include "formats/safetensors/strict_json.h"
#include "fuzz/fuzz_target.h"

namespace {

// Whether every value of `written` is in `input` at the same place (objects may hold more keys
// in `input`: the reader ignores what it does not know).
bool found_in(const nlohmann::json& written, const nlohmann::json& input) {
  if (written.is_object()) {
    if (!input.is_object()) return false;
    for (auto it = written.begin(); it != written.end(); ++it) {
      auto there = input.find(it.key());
      if (there == input.end() || !found_in(it.value(), *there)) return false;
    }
    return true;
  }
  if (written.is_array()) {
    if (!input.is_array() || input.size() != written.size()) return false;
    for (size_t i = 0; i < written.size(); ++i)
      if (!found_in(written[i], input[i])) return false;
    return true;
  }
  return written == input;
}

}  // namespace

MOEPACK_FUZZ_TARGET(manifest) {
  using namespace moepack;
  constexpr const char* kPath = "fuzz-artifact/moepack.json";
  artifact::Manifest manifest;
  nlohmann::json input;
  std::string error;
  if (!fuzz::expect_input_error(
          [&] {
            input = parse_strict_json(std::span<const uint8_t>(data, size), kPath);
            manifest = artifact::manifest_from_json(input, kPath);
          },
          &error)) {
    MOEPACK_FUZZ_CHECK(error.find(kPath) != std::string::npos, "message does not name the manifest: " + error);
    return;
  }
  const std::string written = artifact::manifest_text(manifest);
  MOEPACK_FUZZ_CHECK(found_in(nlohmann::json::parse(written), input), "the manifest read differs from the document:\n" + written);
  artifact::Manifest again;
  const bool reread = fuzz::expect_input_error([&] { again = artifact::manifest_from_json(parse_strict_json(written, kPath), kPath); }, &error);
  MOEPACK_FUZZ_CHECK(reread, "the manifest this reader accepted is refused once written back: " + error);
  MOEPACK_FUZZ_CHECK(artifact::manifest_text(again) == written, "the round trip changed the manifest:\n" + written);
}
