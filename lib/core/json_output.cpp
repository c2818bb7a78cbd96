#include "lib/core/json_output.h"

namespace moepack {
namespace {

template <class Json>
std::string serialize_replacing_invalid_utf8(const Json& document, int indent) {
  // ensure_ascii=false keeps valid non-ASCII text readable; only invalid bytes become U+FFFD.
  return document.dump(indent, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

}  // namespace

std::string safe_json_text(const nlohmann::json& document, int indent) { return serialize_replacing_invalid_utf8(document, indent); }

std::string safe_json_text(const nlohmann::ordered_json& document, int indent) { return serialize_replacing_invalid_utf8(document, indent); }

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::internal: return "internal";
    case ErrorKind::usage: return "usage";
    case ErrorKind::refused: return "refused";
    case ErrorKind::bad_input: return "bad_input";
    case ErrorKind::verify_failed: return "verify_failed";
    case ErrorKind::io: return "io";
  }
  return "internal";
}

nlohmann::json error_json(ErrorKind kind, const std::string& message) {
  return {{"error", {{"kind", error_kind_name(kind)}, {"exit_code", static_cast<int>(kind)}, {"message", message}}}};
}

}  // namespace moepack
