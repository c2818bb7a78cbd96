#include "formats/safetensors/strict_json.h"

#include <cstring>
#include <fstream>
#include <unordered_set>
#include <vector>

#include "lib/core/error.h"

namespace moepack {
namespace {

using json = nlohmann::json;

// nlohmann's own DOM builder, wrapped to reject duplicate keys and deep nesting.
class StrictSax : public nlohmann::detail::json_sax_dom_parser<json> {
  using Base = nlohmann::detail::json_sax_dom_parser<json>;

 public:
  explicit StrictSax(json& root) : Base(root, false) {}
  std::string error;

  bool start_object(std::size_t n) {
    if (static_cast<int>(keys_.size()) >= kMaxConfigJsonDepth) return fail("nesting deeper than " + std::to_string(kMaxConfigJsonDepth));
    keys_.emplace_back();
    return Base::start_object(n);
  }
  bool end_object() {
    keys_.pop_back();
    return Base::end_object();
  }
  bool start_array(std::size_t n) {
    if (static_cast<int>(keys_.size()) >= kMaxConfigJsonDepth) return fail("nesting deeper than " + std::to_string(kMaxConfigJsonDepth));
    keys_.emplace_back();  // arrays hold no keys; the frame keeps the depth count honest
    return Base::start_array(n);
  }
  bool end_array() {
    keys_.pop_back();
    return Base::end_array();
  }
  bool key(std::string& k) {
    if (!keys_.back().insert(k).second) return fail("duplicate key `" + k + "`");
    return Base::key(k);
  }
  bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception& ex) {
    if (error.empty()) error = std::string(ex.what()) + " (byte " + std::to_string(pos) + ")";
    return false;
  }

 private:
  bool fail(const std::string& why) {
    if (error.empty()) error = why;
    return false;
  }
  std::vector<std::unordered_set<std::string>> keys_;
};

}  // namespace

json parse_strict_json(std::span<const uint8_t> bytes, const std::string& path) {
  if (bytes.size() > kMaxConfigJsonBytes)
    throw_bad_input(path, "", "invalid JSON: larger than " + std::to_string(kMaxConfigJsonBytes) + " bytes");
  if (const void* nul = std::memchr(bytes.data(), 0, bytes.size()))
    throw_bad_input(path, "", "invalid JSON: NUL byte at offset " + std::to_string(static_cast<const uint8_t*>(nul) - bytes.data()));
  json root;
  StrictSax sax(root);
  const char* first = reinterpret_cast<const char*>(bytes.data());
  if (!json::sax_parse(first, first + bytes.size(), &sax, json::input_format_t::json, true, false))
    throw_bad_input(path, "", "invalid JSON: " + (sax.error.empty() ? std::string("malformed") : sax.error));
  return root;
}

json parse_strict_json(const std::string& text, const std::string& path) {
  return parse_strict_json(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()), path);
}

json read_strict_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_io(path, "cannot open", errno);
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  if (size < 0) throw_io(path, "cannot read", errno);
  if (static_cast<uint64_t>(size) > kMaxConfigJsonBytes)
    throw_bad_input(path, "", "invalid JSON: larger than " + std::to_string(kMaxConfigJsonBytes) + " bytes");
  in.seekg(0);
  std::string text(static_cast<size_t>(size), '\0');
  if (!in.read(text.data(), size)) throw_io(path, "cannot read", errno);
  return parse_strict_json(text, path);
}

}  // namespace moepack
