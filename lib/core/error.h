// One error type for the whole project. Its kind is the process exit code of docs/CLI.md, so the
// CLI maps any failure to the contract without knowing where it came from.
#pragma once

#include <stdexcept>
#include <string>

namespace moepack {

enum class ErrorKind : int {
  internal = 1,     // a bug
  usage = 2,        // bad flags
  refused = 3,      // the oracle refuses the deployment
  bad_input = 4,    // malformed or unsupported checkpoint, failed validation
  verify_failed = 5,
  io = 6,           // disk full, permission, ...
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string message) : std::runtime_error(std::move(message)), kind_(kind) {}
  ErrorKind kind() const { return kind_; }
  int exit_code() const { return static_cast<int>(kind_); }

 private:
  ErrorKind kind_;
};

// "FILE: tensor `NAME`: RULE" — the shape every bad-input message takes, so a user can find
// the offending bytes. Empty parts are left out.
std::string describe_location(const std::string& file, const std::string& tensor);

[[noreturn]] void throw_bad_input(const std::string& file, const std::string& tensor, const std::string& rule);
[[noreturn]] void throw_io(const std::string& path, const std::string& what, int errno_value);
[[noreturn]] void throw_internal(const std::string& what);

}  // namespace moepack
