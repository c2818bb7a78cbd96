// The JSON `moepack inspect --json --check-values` prints for a stranger's file, built by the
// code the CLI uses: the inspect document (lib/report) when the file opens, else the error
// document main.cpp prints (lib/core/json_output), both serialized by safe_json_text. The parsers
// have their own targets; this one fuzzes what the CLI makes of their messages, which quote the
// input (a JSON parse error's "last read" can stop inside a multi-byte character).
//
// Input: the bytes of one .safetensors file. Its name holds bytes that are not UTF-8 (as a path
// given on a command line can), so every message naming the file needs the replacement too.
//
// Beyond "no crash": the text parses back as JSON (nlohmann's parser refuses invalid UTF-8);
// it has the documented shape (an "error" object with kind, exit code 4 or 6 and the message;
// or the inspect document with "path", "moe_layers" and an "error" exactly when the scan found
// bad values); replacement changes only what is not valid UTF-8: the ASCII bytes of the message
// and path survive in order, and a message that is valid UTF-8 (checked by our own decoder
// here) comes back unchanged.
// fuzz-links: moepack_report
// fuzz-max-len: 16384
#include <string>

#include <nlohmann/json.hpp>

#include "formats/checkpoints/checkpoint.h"
#include "fuzz/fuzz_scratch.h"
#include "fuzz/fuzz_target.h"
#include "lib/core/json_output.h"
#include "lib/report/inspect_report.h"

namespace {

// A Latin-1 NBSP, a byte that never starts a sequence, and a sequence cut after two of three bytes.
const std::string kFileName = std::string("model-\xa0\xff-\xe2\x80") + ".safetensors";

const moepack::fuzz::ScratchDir& scratch_dir() {
  static moepack::fuzz::ScratchDir dir;
  return dir;
}

std::string ascii_only(const std::string& text) {
  std::string out;
  for (char c : text)
    if (static_cast<unsigned char>(c) < 0x80) out += c;
  return out;
}

// RFC 3629 UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool is_valid_utf8(const std::string& text) {
  static const uint32_t kSmallestOfLength[] = {0, 0x80, 0x800, 0x10000};
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    size_t continuation = 0;
    uint32_t code_point = 0;
    if (lead < 0x80) {
      ++i;
      continue;
    } else if ((lead & 0xE0) == 0xC0) {
      continuation = 1, code_point = lead & 0x1Fu;
    } else if ((lead & 0xF0) == 0xE0) {
      continuation = 2, code_point = lead & 0x0Fu;
    } else if ((lead & 0xF8) == 0xF0) {
      continuation = 3, code_point = lead & 0x07u;
    } else {
      return false;
    }
    if (text.size() - i <= continuation) return false;
    for (size_t k = 1; k <= continuation; ++k) {
      const auto byte = static_cast<unsigned char>(text[i + k]);
      if ((byte & 0xC0) != 0x80) return false;
      code_point = (code_point << 6) | (byte & 0x3Fu);
    }
    if (code_point < kSmallestOfLength[continuation] || code_point > 0x10FFFF || (code_point >= 0xD800 && code_point <= 0xDFFF)) return false;
    i += continuation + 1;
  }
  return true;
}

// The printed string keeps the original's ASCII bytes, and all of it when it was valid UTF-8.
void check_replaced_only_invalid_bytes(const nlohmann::json& printed, const std::string& original, const char* what) {
  MOEPACK_FUZZ_CHECK(printed.is_string(), std::string(what) + " is not a string");
  const std::string text = printed.get<std::string>();
  MOEPACK_FUZZ_CHECK(ascii_only(text) == ascii_only(original), std::string(what) + " lost or gained ASCII bytes: " + text);
  if (is_valid_utf8(original)) MOEPACK_FUZZ_CHECK(text == original, std::string(what) + " changed although it was valid UTF-8: " + text);
}

nlohmann::json parse_back(const std::string& text) {
  nlohmann::json document = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  MOEPACK_FUZZ_CHECK(!document.is_discarded(), "the printed text is not valid JSON: " + text);
  MOEPACK_FUZZ_CHECK(document.is_object(), "the printed document is not an object: " + text);
  return document;
}

}  // namespace

MOEPACK_FUZZ_TARGET(inspect_json) {
  using namespace moepack;
  const fuzz::ScratchDir& dir = scratch_dir();
  dir.write(kFileName, data, size);
  const std::string path = dir.file(kFileName);

  // What run_inspect prints on success, or what main.cpp's handler prints for the Error.
  try {
    const ckpt::Checkpoint checkpoint = ckpt::open_checkpoint(path);
    const ckpt::ValueScan scan = ckpt::scan_values(checkpoint);
    const nlohmann::json document = parse_back(safe_json_text(report::inspect_json(checkpoint, path, &scan)));
    MOEPACK_FUZZ_CHECK(document.contains("path"), "no path");
    check_replaced_only_invalid_bytes(document.at("path"), path, "path");
    MOEPACK_FUZZ_CHECK(document.contains("moe_layers") && document.at("moe_layers").is_array(), "no moe_layers array");
    MOEPACK_FUZZ_CHECK(document.contains("error") == (scan.bad_values > 0), "an error object without bad values, or bad values without one");
    if (scan.bad_values > 0) {
      const nlohmann::json& error = document.at("error");
      MOEPACK_FUZZ_CHECK(error.is_object() && error.value("exit_code", 0) == 4 && error.contains("message"), "bad values are not an exit-4 error");
      check_replaced_only_invalid_bytes(error.at("message"), report::bad_values_message(scan), "bad-values message");
    }
  } catch (const Error& e) {
    MOEPACK_FUZZ_CHECK(e.kind() == ErrorKind::bad_input || e.kind() == ErrorKind::io,
                       "error of kind " + std::to_string(e.exit_code()) + " on untrusted input: " + e.what());
    const nlohmann::json document = parse_back(safe_json_text(error_json(e.kind(), e.what())));
    MOEPACK_FUZZ_CHECK(document.size() == 1 && document.contains("error") && document.at("error").is_object(), "not one error object");
    const nlohmann::json& error = document.at("error");
    MOEPACK_FUZZ_CHECK(error.value("exit_code", 0) == e.exit_code(), "exit code differs from the error's kind");
    MOEPACK_FUZZ_CHECK(error.value("kind", "") == (e.kind() == ErrorKind::bad_input ? "bad_input" : "io"), "kind name differs from the error's kind");
    MOEPACK_FUZZ_CHECK(error.contains("message"), "no message");
    check_replaced_only_invalid_bytes(error.at("message"), e.what(), "message");
  }
}
