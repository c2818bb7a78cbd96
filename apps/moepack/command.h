// Subcommands register themselves (CLI11's subcommand-in-files shape): each file defines its
// options struct, a setup function that declares flags on its CLI::App, and a run function.
// main.cpp only dispatches; no subcommand computes anything, it calls lib/ and formats/.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace moepack::cli {

// Setup declares the subcommand's flags and sets its callback; the callback returns the exit code
// through `set_exit_code`.
using SetupFn = std::function<void(CLI::App& parent)>;

struct CommandRegistration {
  CommandRegistration(int order, SetupFn setup);
};

void set_exit_code(int code);
int exit_code();

// Global output flags shared by every subcommand.
struct GlobalFlags {
  bool quiet = false;
  bool progress = false;
  bool json = false;  // set by subcommands that have --json, so errors are also printed as JSON
};
GlobalFlags& global_flags();

// A count flag's check: a whole number from `lo` to `hi`. CLI11's Range alone answers a word
// ("--layers abc") with "Value abc not in range 1 to 4294967296", as if it were a number too
// large; this says what is wrong with either.
inline CLI::Validator whole_number(uint64_t lo, uint64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& value) -> std::string {
        const std::string wanted = "a whole number from " + std::to_string(lo) + " to " + std::to_string(hi);
        if (value.empty() || value.size() > 19 || value.find_first_not_of("0123456789") != std::string::npos)
          return "`" + value + "` is not " + wanted;
        const uint64_t n = std::stoull(value);
        return n < lo || n > hi ? value + " is not " + wanted : std::string();
      },
      "");
}

}  // namespace moepack::cli
