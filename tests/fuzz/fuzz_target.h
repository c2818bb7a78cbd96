// The one shape every fuzz target takes (README.md in this directory has the full pattern):
//
//   #include "fuzz/fuzz_target.h"
//   MOEPACK_FUZZ_TARGET(st_header) {   // `data` and `size` are in scope
//     moepack::fuzz::expect_input_error([&] { ... });
//   }
//
// Built by tests/fuzz/CMakeLists.txt (clang, -DMOEPACK_FUZZ=ON), a file fuzz_<name>.cpp becomes
// the libFuzzer binary fuzz_<name>. Compiled with MOEPACK_FUZZ_REPLAY defined (a one-line
// wrapper in tests/fuzz/replay/), the same body is registered by name instead, and the ordinary
// g++ test suite replays tests/fuzz/regressions/<name>/* through it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>

#include "lib/core/error.h"

namespace moepack::fuzz {

// A property of the target was violated (a wrong result, a forbidden error kind). The libFuzzer
// entry point turns it into abort(), which saves the input; a replay test reports it.
class PropertyViolated : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

[[noreturn]] inline void violated(const std::string& what) { throw PropertyViolated(what); }

#define MOEPACK_FUZZ_CHECK(cond, what) \
  do {                                 \
    if (!(cond)) ::moepack::fuzz::violated(std::string(#cond ": ") + (what)); \
  } while (0)

// Runs `body` on untrusted bytes. The contract for untrusted input is: succeed, or throw
// moepack::Error of kind bad_input (4) or io (6). Any other kind (internal = a bug), any other
// exception type (a library exception escaping our Error, std::bad_alloc from a size we did not
// bound) is a property violation. Returns whether `body` completed without an Error; the
// message of the Error goes to `message` when given.
template <class Body>
bool expect_input_error(Body&& body, std::string* message = nullptr) {
  try {
    body();
    return true;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::bad_input && e.kind() != ErrorKind::io)
      violated("error of kind " + std::to_string(e.exit_code()) + " on untrusted input: " + e.what());
    if (message) *message = e.what();
    return false;
  }
}

using TargetFn = void (*)(const uint8_t* data, size_t size);

// Replay mode: every target compiled into the test binary, by name.
inline std::map<std::string, TargetFn>& registered_targets() {
  static std::map<std::string, TargetFn> targets;
  return targets;
}
inline bool register_target(const char* name, TargetFn fn) {
  registered_targets().emplace(name, fn);
  return true;
}

// libFuzzer mode: the body's failures become a crash with a readable reason (libFuzzer saves
// the input on abort; an exception escaping LLVMFuzzerTestOneInput would say less).
inline void run_under_libfuzzer(TargetFn fn, const uint8_t* data, size_t size) {
  try {
    fn(data, size);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moepack fuzz target failed: %s\n", e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "moepack fuzz target failed: an exception of unknown type\n");
    std::abort();
  }
}

}  // namespace moepack::fuzz

#if defined(MOEPACK_FUZZ_REPLAY)
#define MOEPACK_FUZZ_ENTRY(name) \
  [[maybe_unused]] static const bool moepack_fuzz_registered = ::moepack::fuzz::register_target(#name, &moepack_fuzz_body);
#else
#define MOEPACK_FUZZ_ENTRY(name)                                                  \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {      \
    ::moepack::fuzz::run_under_libfuzzer(&moepack_fuzz_body, data, size);        \
    return 0;                                                                     \
  }
#endif

#define MOEPACK_FUZZ_TARGET(name)                                      \
  static void moepack_fuzz_body(const uint8_t* data, size_t size);    \
  MOEPACK_FUZZ_ENTRY(name)                                             \
  static void moepack_fuzz_body([[maybe_unused]] const uint8_t* data, [[maybe_unused]] size_t size)
