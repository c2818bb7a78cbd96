// Helpers shared by every test binary: scratch directories, file writing, running the CLI.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace moepack::test {

// Whether this binary runs under AddressSanitizer (CI's second run of the suite, clang at -O1):
// sweeps whose cases are logic, not memory, run fewer of them there (each test says which).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitizerBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitizerBuild = true;
#else
inline constexpr bool kSanitizerBuild = false;
#endif
#else
inline constexpr bool kSanitizerBuild = false;
#endif

// A fresh directory under $TMPDIR, removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void write_file(const std::string& path, const std::vector<uint8_t>& bytes);
void write_text(const std::string& path, const std::string& text);
std::vector<uint8_t> read_file(const std::string& path);
// Every regular file under `dir`, by its path relative to `dir`, with its bytes (comparing two
// artifacts file by file).
std::map<std::string, std::vector<uint8_t>> all_files(const std::string& dir);

// A safetensors file from a header text: 8-byte little-endian length, the text, then `data`.
std::vector<uint8_t> safetensors_bytes(const std::string& header_json, const std::vector<uint8_t>& data);
std::vector<uint8_t> safetensors_bytes(uint64_t declared_length, const std::string& header_json, const std::vector<uint8_t>& data);

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
// Runs the built moepack binary with `args` (shell-quoted here), capturing stdout and stderr.
CommandResult run_moepack(const std::vector<std::string>& args);
// The same, run from `working_dir`, so relative paths in `args` (and in what moepack prints)
// are relative to it.
CommandResult run_moepack_in(const std::string& working_dir, const std::vector<std::string>& args);

std::string source_dir();  // the repository root
// The shipped samples (samples/*/), by name, sorted.
std::vector<std::string> sample_names();
std::string moepack_binary();

}  // namespace moepack::test
