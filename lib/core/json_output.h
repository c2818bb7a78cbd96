// JSON the CLI prints: one serializer every `--json` document goes through, and the
// `{"error": {...}}` object docs/CLI.md promises on stdout when a `--json` run fails.
//
// Strings in these documents quote bytes from strangers: a JSON parse error's "last read"
// excerpt of a header (which can stop in the middle of a multi-byte character), a path given
// on the command line or found in a directory listing. nlohmann's default dump throws
// type_error 316 on invalid UTF-8, and inside the top-level error handler that throw is an
// abort. The serializer here replaces each invalid sequence with U+FFFD instead, so output
// never fails for a string's bytes.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "lib/core/error.h"

namespace moepack {

// The document as text, always valid UTF-8 and valid JSON (indent < 0: one line).
std::string safe_json_text(const nlohmann::json& document, int indent = 2);
std::string safe_json_text(const nlohmann::ordered_json& document, int indent = 2);

// "internal", "usage", "refused", "bad_input", "verify_failed", "io".
const char* error_kind_name(ErrorKind kind);

// {"error": {"kind": ..., "exit_code": ..., "message": ...}}; the message is kept as given
// (invalid UTF-8 is only replaced when the document is serialized).
nlohmann::json error_json(ErrorKind kind, const std::string& message);

}  // namespace moepack
