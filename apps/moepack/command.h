// Subcommands register themselves (CLI11's subcommand-in-files shape): each file defines its
// options struct, a setup function that declares flags on its CLI::App, and a run function.
// main.cpp only dispatches; no subcommand computes anything, it calls lib/ and formats/.
#pragma once

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

}  // namespace moepack::cli
