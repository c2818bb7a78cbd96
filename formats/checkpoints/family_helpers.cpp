// What the family files (and detect.cpp) share: typed reads of the config JSON that name the file
// and key on error, module-name matching as vLLM's quantization configs do it, and the tensor
// rules several families store alike. Apart from checkpoint.cpp, which calls the families through
// detect.cpp, so that the families stand on these without calling back into the reader.
#include <cmath>
#include <regex>

#include <fnmatch.h>

#include "formats/checkpoints/checkpoint.h"
#include "lib/core/error.h"

namespace moepack::ckpt::detail {

// ---- JSON helpers ----------------------------------------------------------------------------

const nlohmann::json* find_key(const nlohmann::json& obj, const std::string& key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string json_string(const nlohmann::json& obj, const std::string& key, const std::string& file, const std::string& fallback) {
  const auto* v = find_key(obj, key);
  if (!v) return fallback;
  if (!v->is_string()) throw_bad_input(file, "", "`" + key + "` must be a string, got " + v->dump());
  return v->get<std::string>();
}

int64_t json_int(const nlohmann::json& obj, const std::string& key, const std::string& file, int64_t fallback) {
  const auto* v = find_key(obj, key);
  if (!v) return fallback;
  if (v->is_number_integer()) return v->get<int64_t>();
  // Some exporters write whole numbers as floats (128.0).
  if (v->is_number_float()) {
    double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) return static_cast<int64_t>(d);
  }
  throw_bad_input(file, "", "`" + key + "` must be an integer, got " + v->dump());
}

bool json_bool(const nlohmann::json& obj, const std::string& key, const std::string& file, bool fallback) {
  const auto* v = find_key(obj, key);
  if (!v) return fallback;
  if (!v->is_boolean()) throw_bad_input(file, "", "`" + key + "` must be true or false, got " + v->dump());
  return v->get<bool>();
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool regex_prefix_match(const std::string& pattern, const std::string& text, const std::string& file) {
  try {
    std::regex re(pattern, std::regex::ECMAScript);
    return std::regex_search(text, re, std::regex_constants::match_continuous);
  } catch (const std::regex_error& e) {
    throw_bad_input(file, "", "invalid regular expression `" + pattern + "`: " + e.what());
  }
}

bool fnmatch_glob(const std::string& pattern, const std::string& text) { return ::fnmatch(pattern.c_str(), text.c_str(), 0) == 0; }

// ---- shared recipes -----------------------------------------------------------------------------

namespace {
uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
}  // namespace

std::vector<SourceTensorRule> fp4_weight_rules(const std::string& weight_suffix, DType scale_dtype, uint64_t group) {
  SourceTensorRule w{weight_suffix, {DType::U8}, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i / 2}; }};
  w.param = weight_suffix;
  SourceTensorRule s{"weight_scale", {scale_dtype}, [group](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, ceil_div(i, group)}; }};
  s.param = "weight_scale";
  return {w, s};
}

SourceTensorRule fp8_weight_rule(const std::string& suffix) {
  SourceTensorRule w{suffix, {DType::F8_E4M3}, [](uint64_t o, uint64_t i) { return std::vector<uint64_t>{o, i}; }};
  w.param = suffix;
  return w;
}

SourceTensorRule scalar_rule(const std::string& suffix, Assemble w13, bool required) {
  SourceTensorRule r{suffix, {DType::F32, DType::BF16, DType::F16}, nullptr, required};
  r.param = suffix;
  r.w13 = w13;
  return r;
}

SourceTensorRule block_scale_rule(const std::string& suffix, uint64_t bn, uint64_t bk, std::vector<DType> dtypes) {
  SourceTensorRule r{suffix, std::move(dtypes), [bn, bk](uint64_t o, uint64_t i) { return std::vector<uint64_t>{ceil_div(o, bn), ceil_div(i, bk)}; }};
  r.param = suffix;
  return r;
}

}  // namespace moepack::ckpt::detail
