// CLI golden tests: what users see, pinned byte for byte, so that a change in it is a reviewed
// diff (the shape of zstd's tests/cli-tests). Every case is one file under tests/cli/golden/:
//
//   GROUP/CASE.args             the arguments, one per line, run from the repository root
//                               ('#' lines are comments; {tmp} is a scratch directory)
//   GROUP/CASE.stdout.exact     stdout, byte for byte        (or .stdout.glob; absent: empty)
//   GROUP/CASE.stderr.exact     stderr, byte for byte        (or .stderr.glob; absent: empty)
//   GROUP/CASE.exit             the exit code                (absent: 0)
//   GROUP/CASE.manifest.exact   {tmp}/out/moepack.json, for cases that convert into {tmp}/out
//
// In every output the scratch directory reads {tmp}; in a manifest the moepack version reads
// {version}, so a release changes no golden file. A glob matches line by line: `*` is any run
// of characters within a line, a line `...` any number of lines.
//
// MOEPACK_UPDATE_GOLDEN=1 rewrites the .exact, .exit and .manifest.exact files from this
// build's output (globs are written by hand and only checked); tests/cli/golden/README.md says
// how to add a case and review an update.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace moepack::test {
namespace {
namespace fs = std::filesystem;

fs::path golden_root() { return fs::path(source_dir()) / "tests/cli/golden"; }

bool updating() {
  const char* v = std::getenv("MOEPACK_UPDATE_GOLDEN");
  return v && *v && std::string(v) != "0";
}

std::optional<std::string> read_if_present(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_or_remove(const fs::path& path, const std::string& text, bool keep) {
  if (!keep) {
    fs::remove(path);
    return;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) text.replace(at, from.size(), to);
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// `*` matches any run of characters (the classic two-pointer match with one backtrack point).
bool line_matches(const std::string& pattern, const std::string& line) {
  size_t p = 0, l = 0, star = std::string::npos, resume = 0;
  while (l < line.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = l;
    } else if (p < pattern.size() && pattern[p] == line[l]) {
      ++p;
      ++l;
    } else if (star != std::string::npos) {
      p = star + 1;
      l = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

// Line by line; a pattern line `...` matches any number of lines (dynamic programming over
// pattern lines x text lines, small for the few glob files there are).
bool glob_matches(const std::string& pattern, const std::string& text) {
  const auto pat = split_lines(pattern), lines = split_lines(text);
  if (!pattern.empty() && !text.empty() && (pattern.back() == '\n') != (text.back() == '\n')) return false;
  // ok[i][j]: pattern lines from i on match text lines from j on.
  std::vector<std::vector<char>> ok(pat.size() + 1, std::vector<char>(lines.size() + 1, 0));
  ok[pat.size()][lines.size()] = 1;
  for (size_t i = pat.size(); i-- > 0;)
    for (size_t j = lines.size() + 1; j-- > 0;) {
      if (pat[i] == "...") ok[i][j] = ok[i + 1][j] || (j < lines.size() && ok[i][j + 1]);
      else ok[i][j] = j < lines.size() && line_matches(pat[i], lines[j]) && ok[i + 1][j + 1];
    }
  return ok[0][0];
}

// Where two texts first differ, for the failure message.
std::string first_difference(const std::string& expected, const std::string& actual) {
  const auto e = split_lines(expected), a = split_lines(actual);
  for (size_t i = 0; i < std::max(e.size(), a.size()); ++i) {
    const std::string want = i < e.size() ? e[i] : "(end of output)", got = i < a.size() ? a[i] : "(end of output)";
    if (want != got) return "line " + std::to_string(i + 1) + ":\n  expected: " + want + "\n  actual:   " + got;
  }
  return "the final newline differs";
}

struct GoldenCase {
  std::string name;  // GROUP/CASE
  fs::path base;     // tests/cli/golden/GROUP/CASE (the expectation files add suffixes)
};

// A failing case is named in the report by its file, not by its bytes.
void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.name; }

std::vector<GoldenCase> discover_cases() {
  std::vector<GoldenCase> cases;
  if (!fs::exists(golden_root())) return cases;
  for (const auto& entry : fs::recursive_directory_iterator(golden_root())) {
    if (!entry.is_regular_file() || entry.path().extension() != ".args") continue;
    fs::path base = entry.path();
    base.replace_extension();
    cases.push_back({fs::relative(base, golden_root()).string(), base});
  }
  std::sort(cases.begin(), cases.end(), [](const GoldenCase& a, const GoldenCase& b) { return a.name < b.name; });
  return cases;
}

std::vector<std::string> read_args(const fs::path& args_file, const std::string& scratch) {
  std::vector<std::string> args;
  for (std::string line : split_lines(read_if_present(args_file).value_or(""))) {
    if (line.empty() || line[0] == '#') continue;
    replace_all(line, "{tmp}", scratch);
    args.push_back(line);
  }
  return args;
}

fs::path with_suffix(const fs::path& base, const std::string& suffix) { return fs::path(base.string() + suffix); }

// One output stream against STREAM.exact or STREAM.glob beside the case (absent: empty).
void check_stream(const GoldenCase& c, const std::string& stream, const std::string& actual) {
  const fs::path exact = with_suffix(c.base, "." + stream + ".exact"), glob = with_suffix(c.base, "." + stream + ".glob");
  const auto glob_text = read_if_present(glob);
  if (glob_text) {
    ASSERT_FALSE(fs::exists(exact)) << c.name << ": both " << exact << " and " << glob;
    EXPECT_TRUE(glob_matches(*glob_text, actual)) << c.name << ": " << stream << " does not match " << glob << " (globs are edited by hand)\n"
                                                  << "actual " << stream << ":\n"
                                                  << actual;
    return;
  }
  if (updating()) {
    write_or_remove(exact, actual, !actual.empty());
    return;
  }
  const std::string expected = read_if_present(exact).value_or("");
  EXPECT_TRUE(expected == actual) << c.name << ": " << stream << " differs from " << (fs::exists(exact) ? exact.string() : "(empty)") << " at "
                                  << first_difference(expected, actual) << "\n(if the change is intended: MOEPACK_UPDATE_GOLDEN=1, then review git diff)";
}

class CliGolden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(CliGolden, OutputAndExitCode) {
  const GoldenCase& c = GetParam();
  TempDir scratch;
  CommandResult r = run_moepack_in(source_dir(), read_args(with_suffix(c.base, ".args"), scratch.path()));
  replace_all(r.out, scratch.path(), "{tmp}");
  replace_all(r.err, scratch.path(), "{tmp}");
  check_stream(c, "stdout", r.out);
  check_stream(c, "stderr", r.err);

  const fs::path exit_file = with_suffix(c.base, ".exit");
  if (updating()) {
    write_or_remove(exit_file, std::to_string(r.exit_code) + "\n", r.exit_code != 0);
  } else {
    const std::string expected_exit = read_if_present(exit_file).value_or("0\n");
    EXPECT_EQ(std::to_string(r.exit_code) + "\n", expected_exit) << c.name << ": exit code (" << exit_file << ")";
  }

  const fs::path manifest_file = with_suffix(c.base, ".manifest.exact");
  std::optional<std::string> manifest = read_if_present(fs::path(scratch.path()) / "out/moepack.json");
  if (manifest) replace_all(*manifest, std::string("\"moepack_version\": \"") + MOEPACK_VERSION_STRING + "\"", "\"moepack_version\": \"{version}\"");
  if (updating()) {
    write_or_remove(manifest_file, manifest.value_or(""), manifest.has_value());
    return;
  }
  const auto expected_manifest = read_if_present(manifest_file);
  EXPECT_EQ(expected_manifest.has_value(), manifest.has_value())
      << c.name << ": " << (manifest ? "the run wrote {tmp}/out/moepack.json but there is no " : "the run wrote no manifest, expected ") << manifest_file;
  if (expected_manifest && manifest) {
    EXPECT_TRUE(*expected_manifest == *manifest) << c.name << ": the manifest differs from " << manifest_file << " at "
                                                 << first_difference(*expected_manifest, *manifest);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CliGolden, ::testing::ValuesIn(discover_cases()), [](const auto& info) {
  std::string name = info.param.name;
  std::replace_if(name.begin(), name.end(), [](char ch) { return !std::isalnum(static_cast<unsigned char>(ch)); }, '_');
  return name;
});

// The cases every sample has, so a new sample cannot arrive without its pinned output.
TEST(CliGoldenCoverage, EverySampleHasItsCases) {
  const std::vector<std::string> per_sample = {"inspect", "inspect-json", "plan-sm90", "plan-sm100-json"};
  size_t samples = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(source_dir()) / "samples")) {
    if (!entry.is_directory()) continue;
    ++samples;
    const std::string sample = entry.path().filename().string();
    for (const auto& c : per_sample)
      EXPECT_TRUE(fs::exists(golden_root() / sample / (c + ".args")))
          << "samples/" << sample << " has no case tests/cli/golden/" << sample << "/" << c
          << ".args (copy the cases of another sample, then record them with MOEPACK_UPDATE_GOLDEN=1)";
  }
  EXPECT_GT(samples, 0u);
}

// The glob rules themselves, since every .glob file relies on them.
TEST(CliGoldenGlob, StarsAndEllipsis) {
  EXPECT_TRUE(glob_matches("a *\n", "a anything\n"));
  EXPECT_TRUE(glob_matches("\"seconds\": *,\n", "\"seconds\": 0.25,\n"));
  EXPECT_FALSE(glob_matches("a *\n", "b x\n"));
  EXPECT_FALSE(glob_matches("a\n", "a\nb\n"));
  EXPECT_TRUE(glob_matches("a\n...\nz\n", "a\nb\nc\nz\n"));
  EXPECT_TRUE(glob_matches("a\n...\nz\n", "a\nz\n"));
  EXPECT_FALSE(glob_matches("a\n...\nz\n", "a\nb\n"));
  EXPECT_TRUE(glob_matches("*[*]*\n", "x [1, 2] y\n"));
  EXPECT_FALSE(glob_matches("a\n", "a"));
}

}  // namespace
}  // namespace moepack::test
