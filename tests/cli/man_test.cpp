// The manual pages: each renders without groff warnings, every subcommand has one, and
// `cmake --install` puts them under share/man/man1.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>

#include "support/test_support.h"

namespace moepack::test {
namespace {
namespace fs = std::filesystem;

std::vector<std::string> man_pages() {
  std::vector<std::string> pages;
  for (const auto& e : fs::directory_iterator(source_dir() + "/man"))
    if (e.path().extension() == ".1") pages.push_back(e.path().string());
  std::sort(pages.begin(), pages.end());
  return pages;
}

int run_shell(const std::string& cmd, std::string* output) {
  TempDir scratch;
  std::string full = cmd + " >" + scratch.file("out") + " 2>&1";
  int status = std::system(full.c_str());
  auto bytes = read_file(scratch.file("out"));
  *output = std::string(bytes.begin(), bytes.end());
  return WEXITSTATUS(status);
}

TEST(ManPages, RenderWithoutWarnings) {
  auto pages = man_pages();
  ASSERT_FALSE(pages.empty());
  for (const auto& page : pages) {
    std::string out;
    // -ww: all warnings; -z: discard the rendering, keep diagnostics.
    int rc = run_shell("groff -man -Tutf8 -ww -z '" + page + "'", &out);
    EXPECT_EQ(rc, 0) << page << "\n" << out;
    EXPECT_EQ(out, "") << page;
    std::string text;
    run_shell("groff -man -Tutf8 -P-cbou '" + page + "'", &text);  // -P-cbou: plain text, no overstrike
    EXPECT_NE(text.find("NAME"), std::string::npos) << page;
    EXPECT_NE(text.find("EXAMPLES"), std::string::npos) << page;
  }
}

TEST(ManPages, EverySubcommandHasAPage) {
  CommandResult help = run_moepack({"--help"});
  ASSERT_EQ(help.exit_code, 0) << help.err;
  // CLI11 lists subcommands under "Subcommands:" as indented names.
  auto pos = help.out.find("Subcommands:");
  ASSERT_NE(pos, std::string::npos) << help.out;
  std::regex name_line(R"(\n\s+([a-z][a-z0-9-]*)\s)");
  std::set<std::string> commands;
  std::string rest = help.out.substr(pos);
  for (std::sregex_iterator it(rest.begin(), rest.end(), name_line), end; it != end; ++it) commands.insert((*it)[1]);
  ASSERT_FALSE(commands.empty());
  for (const auto& c : commands)
    EXPECT_TRUE(fs::exists(source_dir() + "/man/moepack-" + c + ".1")) << "no man page for `" << c << "`";
}

TEST(ManPages, InstalledByCmakeInstall) {
  TempDir prefix;
  std::string build_dir = fs::path(moepack_binary()).parent_path().string();
  std::string out;
  int rc = run_shell("cmake --install '" + build_dir + "' --prefix '" + prefix.path() + "'", &out);
  ASSERT_EQ(rc, 0) << out;
  for (const auto& page : man_pages())
    EXPECT_TRUE(fs::exists(prefix.path() + "/share/man/man1/" + fs::path(page).filename().string())) << page;
  EXPECT_TRUE(fs::exists(prefix.path() + "/bin/moepack"));
}

}  // namespace
}  // namespace moepack::test
