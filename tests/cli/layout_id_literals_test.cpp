// Layout ids are spelled in one place, lib/core/layout_ids.h: the packers name themselves, the
// oracle assigns ids and the pipeline and runtime look them up through its heads and builders,
// so a misspelt id does not compile. This test keeps it so: no code of the rooms that deal in
// layout ids may hold a string literal that starts like one ("vllm.", "triton_kernels.", ...).
// Comments may quote ids; tests may spell them (they pin the strings).
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace moepack::test {
namespace {
namespace fs = std::filesystem;

// Literals that start like an id but name something else, with why.
struct Allowed {
  std::string_view file;
  std::string_view literal_start;
  std::string_view why;
};
constexpr Allowed kAllowed[] = {
    {"lib/convert/loader_facts.cpp", "aiter.fused_moe (ROCm/aiter)", "the upstream function a loader flag is read by, quoted in prose"},
};

bool allowed(const std::string& file, const std::string& literal) {
  for (const Allowed& a : kAllowed)
    if (file == a.file && literal.starts_with(a.literal_start)) return true;
  return false;
}

// The code of a line without its `//` comment (a `//` inside a string literal is kept).
std::string code_of(const std::string& line) {
  bool in_string = false;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\' && in_string) {
      ++i;
      continue;
    }
    if (line[i] == '"') in_string = !in_string;
    if (!in_string && line.compare(i, 2, "//") == 0) return line.substr(0, i);
  }
  return line;
}

TEST(LayoutIdLiterals, RoomsSpellLayoutIdsOnlyThroughTheVocabulary) {
  const std::regex id_literal(R"re("((vllm|cpu|flashinfer|triton_kernels|aiter|deep_gemm|humming|b12x|trtllm_gen)\.[A-Za-z_]|torch\.(view|dyn_quant))[^"]*)re");
  const std::string root = source_dir();
  size_t files = 0;
  std::vector<std::string> found;
  for (const char* room : {"packers", "lib/oracle", "lib/convert", "lib/runtime", "lib/experts", "lib/report", "apps"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root + "/" + room)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".cpp" && ext != ".h") continue;
      ++files;
      const std::string rel = fs::relative(entry.path(), root).generic_string();
      const std::vector<uint8_t> bytes = read_file(entry.path().string());
      std::istringstream lines(std::string(bytes.begin(), bytes.end()));
      int number = 0;
      for (std::string line; std::getline(lines, line);) {
        ++number;
        const std::string code = code_of(line);
        for (std::sregex_iterator m(code.begin(), code.end(), id_literal), end; m != end; ++m) {
          const std::string literal = (*m)[0].str().substr(1);
          if (!allowed(rel, literal)) found.push_back(rel + ":" + std::to_string(number) + ": \"" + literal);
        }
      }
    }
  }
  EXPECT_GT(files, 100u) << "the rooms were not found under " << root;
  std::string list;
  for (const auto& f : found) list += "\n  " + f;
  EXPECT_TRUE(found.empty()) << found.size() << " layout ids spelled outside lib/core/layout_ids.h (use its heads and builders):" << list;
}

// The allow list stays true: each entry still matches a literal in its file.
TEST(LayoutIdLiterals, EveryAllowedLiteralStillExists) {
  for (const Allowed& a : kAllowed) {
    const std::vector<uint8_t> bytes = read_file(source_dir() + "/" + std::string(a.file));
    const std::string text(bytes.begin(), bytes.end());
    EXPECT_NE(text.find("\"" + std::string(a.literal_start)), std::string::npos) << a.file << ": " << a.literal_start << " (" << a.why << ")";
  }
}

}  // namespace
}  // namespace moepack::test
