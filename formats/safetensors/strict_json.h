// JSON for files from strangers (config.json, hf_quant_config.json, index.json, manifests):
// duplicate keys are an error (nlohmann would keep the last one silently), nesting depth and
// document size are bounded, and the exact byte range is parsed (no stop at an embedded NUL).
#pragma once

#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace moepack {

inline constexpr int kMaxConfigJsonDepth = 128;
inline constexpr size_t kMaxConfigJsonBytes = 64u << 20;

// The checks every JSON document from a stranger gets before parsing: size cap, no NUL byte
// (nlohmann would stop there), no UTF-8 byte-order mark (nlohmann skips it, Python refuses it).
void check_json_bytes(std::span<const uint8_t> bytes, const std::string& path);
// Throws Error(bad_input) "PATH: invalid JSON: ..." on any violation.
nlohmann::json parse_strict_json(std::span<const uint8_t> bytes, const std::string& path);
nlohmann::json parse_strict_json(const std::string& text, const std::string& path);
// The bytes of a config file: a regular file of at most kMaxConfigJsonBytes (Error otherwise).
std::vector<uint8_t> read_config_file_bytes(const std::string& path);
// Reads the file (bounded by kMaxConfigJsonBytes) and parses it.
nlohmann::json read_strict_json_file(const std::string& path);

}  // namespace moepack
