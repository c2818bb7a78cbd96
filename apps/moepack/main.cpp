#include <csignal>
#include <malloc.h>
#include <cstdio>
#include <iostream>
#include <map>
#include <new>
#include <string_view>

#include "apps/moepack/command.h"
#include "lib/core/cancel.h"
#include "lib/core/error.h"
#include "lib/core/json_output.h"

namespace moepack::cli {
namespace {
std::multimap<int, SetupFn>& registry() {
  static std::multimap<int, SetupFn> r;
  return r;
}
int g_exit_code = 0;
}  // namespace

CommandRegistration::CommandRegistration(int order, SetupFn setup) { registry().emplace(order, std::move(setup)); }
void set_exit_code(int code) { g_exit_code = code; }
int exit_code() { return g_exit_code; }
GlobalFlags& global_flags() {
  static GlobalFlags f;
  return f;
}

}  // namespace moepack::cli

namespace {

// The stderr line is the message as it is (bytes and all); the stdout document goes through
// safe_json_text, so a message quoting invalid UTF-8 cannot make the report itself throw.
void report_error(moepack::ErrorKind kind, const std::string& message) {
  std::fprintf(stderr, "moepack: error: %s\n", message.c_str());
  if (moepack::cli::global_flags().json) std::cout << moepack::safe_json_text(moepack::error_json(kind, message)) << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  // A file size limit must surface as EFBIG from write(), not kill the process mid-file.
  std::signal(SIGXFSZ, SIG_IGN);
  // convert reads, loads and packs each expert in buffers of a few MiB, freed right after. Those
  // from operator new of 2 MiB or more come from lib/core/huge_blocks (allocation.cpp); the
  // rest, and what C code mallocs (the direct-write buffers, zstd), would by default be given
  // back to the kernel on every free (a mapping of its own, or a trimmed heap top), so every
  // expert faulted in and zeroed fresh pages. Kept in the heap, they are reused; resident memory
  // is still what is alive at the peak, since freed blocks are reused before the heap grows.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);

  CLI::App app{"moepack: convert and prepack quantized Mixture-of-Experts checkpoints"};
  app.set_version_flag("--version", std::string("moepack ") + MOEPACK_VERSION_STRING);
  app.require_subcommand(1);
  app.fallthrough();  // global flags (--quiet, --progress) also after the subcommand
  auto& flags = moepack::cli::global_flags();
  app.add_flag("-q,--quiet", flags.quiet, "No progress output");
  app.add_flag("--progress", flags.progress, "Progress output even when stderr is not a terminal");
  for (auto& [order, setup] : moepack::cli::registry()) setup(app);

  // CLI11 would answer "A subcommand is required" to a misspelt one: name it and list the real ones.
  if (argc > 1 && argv[1][0] != '-') {
    std::string known;
    bool found = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      found = found || sub->get_name() == argv[1];
      known += (known.empty() ? "" : ", ") + sub->get_name();
    }
    if (!found) {
      std::fprintf(stderr, "moepack: error: unknown command '%s'; the commands are: %s\n", argv[1], known.c_str());
      return static_cast<int>(moepack::ErrorKind::usage);
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" with code 0 in CLI11.
    if (e.get_exit_code() == 0) return app.exit(e);
    // A flag CLI11 refuses is a usage error like any other: the same stderr line and, when
    // --json was asked for (its callback never ran), the same error document on stdout.
    for (int i = 1; i < argc; ++i)
      if (std::string_view(argv[i]) == "--json") flags.json = true;
    report_error(moepack::ErrorKind::usage, std::string(e.what()) + " (see moepack " + (argc > 1 ? argv[1] : "") + " --help)");
    return static_cast<int>(moepack::ErrorKind::usage);
  } catch (const moepack::Cancelled& c) {
    // Destructors already removed whatever was partial; die of the signal, as shells expect.
    std::fprintf(stderr, "moepack: interrupted by signal %d; nothing was written\n", c.signal_number);
    std::signal(c.signal_number, SIG_DFL);
    std::raise(c.signal_number);
    return 128 + c.signal_number;
  } catch (const moepack::Error& e) {
    report_error(e.kind(), e.what());
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    report_error(moepack::ErrorKind::io, "out of memory");
    return static_cast<int>(moepack::ErrorKind::io);
  } catch (const std::exception& e) {
    report_error(moepack::ErrorKind::internal, std::string("internal error: ") + e.what());
    return static_cast<int>(moepack::ErrorKind::internal);
  }
  return moepack::cli::exit_code();
}
