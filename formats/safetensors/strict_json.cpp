#include "formats/safetensors/strict_json.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
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

void check_json_bytes(std::span<const uint8_t> bytes, const std::string& path) {
  if (bytes.size() > kMaxConfigJsonBytes)
    throw_bad_input(path, "", "invalid JSON: larger than " + std::to_string(kMaxConfigJsonBytes) + " bytes");
  // memchr on an empty span would get a null pointer (undefined even for length 0).
  if (const void* nul = bytes.empty() ? nullptr : std::memchr(bytes.data(), 0, bytes.size()))
    throw_bad_input(path, "", "invalid JSON: NUL byte at offset " + std::to_string(static_cast<const uint8_t*>(nul) - bytes.data()));
  // nlohmann skips a UTF-8 byte-order mark; Python's json (what transformers and vLLM read
  // configs with) refuses one in decoded text, so the file would not load there either.
  if (bytes.size() >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF)
    throw_bad_input(path, "", "invalid JSON: the document starts with a UTF-8 byte-order mark");
}

json parse_strict_json(std::span<const uint8_t> bytes, const std::string& path) {
  check_json_bytes(bytes, path);
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

std::vector<uint8_t> read_config_file_bytes(const std::string& path) {
  // POSIX calls rather than an ifstream: a directory or a FIFO under a config's name must be
  // refused (an ifstream opens a directory, and opening a FIFO blocks until a writer comes), and
  // the size check must come before the buffer is allocated.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw_io(path, "cannot open", errno);
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st{};
  if (::fstat(fd, &st) != 0) throw_io(path, "cannot stat", errno);
  if (!S_ISREG(st.st_mode)) throw_bad_input(path, "", "not a regular file");
  if (static_cast<uint64_t>(st.st_size) > kMaxConfigJsonBytes)
    throw_bad_input(path, "", "invalid JSON: larger than " + std::to_string(kMaxConfigJsonBytes) + " bytes");
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < bytes.size()) {  // a file that shrinks meanwhile is parsed as far as it goes
    ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_io(path, "cannot read", errno);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  bytes.resize(got);
  return bytes;
}

json read_strict_json_file(const std::string& path) { return parse_strict_json(read_config_file_bytes(path), path); }

}  // namespace moepack
