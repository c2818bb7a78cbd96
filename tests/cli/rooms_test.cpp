// The rooms table of docs/ARCHITECTURE.md is the rule of the house: each folder may include only
// its own headers and those of the rooms it uses (directly or through them). CMake links what
// the table allows but does not stop an include that climbs back up; this test does, and checks
// that CMakeLists.txt declares each room with exactly the rooms the table lists.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "support/test_support.h"

namespace moepack::test {
namespace {
namespace fs = std::filesystem;

std::string text_of(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file(path);
  return std::string(bytes.begin(), bytes.end());
}

struct Rooms {
  std::vector<std::string> folders;                   // in the table's order
  std::map<std::string, std::set<std::string>> uses;  // folder -> folders it lists
};

// The "| `folder/` | holds | uses |" rows of the Rooms section.
Rooms rooms_from_architecture() {
  const std::string doc = text_of(source_dir() + "/docs/ARCHITECTURE.md");
  const size_t begin = doc.find("## Rooms"), end = doc.find("\n## ", begin + 1);
  EXPECT_NE(begin, std::string::npos);
  std::istringstream lines(doc.substr(begin, end - begin));
  const std::regex row(R"(^\| `([\w/]+)/` \| .* \| ([^|]+) \|$)");
  Rooms rooms;
  std::map<std::string, std::string> listed;  // folder -> its uses cell
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    rooms.folders.push_back(m[1]);
    listed[m[1]] = m[2];
  }
  auto folder_named = [&](const std::string& name) {
    for (const auto& f : rooms.folders)
      if (fs::path(f).filename() == name) return f;
    ADD_FAILURE() << "the rooms table names `" << name << "`, which is no room";
    return std::string();
  };
  for (const auto& [folder, cell] : listed) {
    std::string uses = std::regex_replace(cell, std::regex(R"(^\s+|\s+$)"), "");
    auto& into = rooms.uses[folder];
    if (uses == "—") continue;
    if (uses.rfind("all", 0) == 0) {
      for (const auto& f : rooms.folders)
        if (f != folder) into.insert(f);
      continue;
    }
    std::istringstream names(uses);
    for (std::string name; std::getline(names, name, ',');)
      into.insert(folder_named(std::regex_replace(name, std::regex(R"(\s)"), "")));
  }
  return rooms;
}

std::set<std::string> reachable(const Rooms& rooms, const std::string& folder) {
  std::set<std::string> seen;
  std::function<void(const std::string&)> visit = [&](const std::string& f) {
    for (const auto& used : rooms.uses.at(f))
      if (seen.insert(used).second) visit(used);
  };
  visit(folder);
  return seen;
}

TEST(Rooms, TheTableListsEveryRoom) {
  const Rooms rooms = rooms_from_architecture();
  for (const char* folder : {"lib/core", "formats/safetensors", "formats/checkpoints", "formats/artifact", "packers", "lib/oracle", "lib/experts",
                             "lib/convert", "lib/runtime", "lib/report", "lib/synth", "apps/moepack"})
    EXPECT_TRUE(rooms.uses.count(folder)) << folder;
}

TEST(Rooms, EveryIncludeStaysInItsRoomOrOneItUses) {
  const Rooms rooms = rooms_from_architecture();
  const std::regex include(R"re(#include "([^"]+)")re");
  size_t files = 0;
  for (const auto& folder : rooms.folders) {
    std::set<std::string> allowed = reachable(rooms, folder);
    allowed.insert(folder);
    for (const auto& entry : fs::directory_iterator(source_dir() + "/" + folder)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".h" && ext != ".cpp") continue;
      ++files;
      const std::string text = text_of(entry.path().string());
      for (auto it = std::sregex_iterator(text.begin(), text.end(), include); it != std::sregex_iterator(); ++it) {
        const std::string header = (*it)[1];
        EXPECT_TRUE(allowed.count(fs::path(header).parent_path().string()))
            << folder << "/" << entry.path().filename().string() << " includes " << header << ", a room `" << folder
            << "` does not use (docs/ARCHITECTURE.md, Rooms)";
      }
    }
  }
  EXPECT_GT(files, 100u);
}

// moepack_room(moepack_X DIRS folder DEPS moepack_Y ...): the DEPS that are rooms are the table's.
TEST(Rooms, CMakeDeclaresTheTablesUses) {
  const Rooms rooms = rooms_from_architecture();
  const std::string cmake = text_of(source_dir() + "/CMakeLists.txt");
  const std::regex declaration(R"(moepack_room\((moepack_\w+) DIRS ([\w/]+) DEPS ([^)]*)\))");
  std::map<std::string, std::string> folder_of_target;
  for (auto it = std::sregex_iterator(cmake.begin(), cmake.end(), declaration); it != std::sregex_iterator(); ++it)
    folder_of_target[(*it)[1]] = (*it)[2];
  size_t declared = 0;
  for (auto it = std::sregex_iterator(cmake.begin(), cmake.end(), declaration); it != std::sregex_iterator(); ++it) {
    const std::string folder = (*it)[2];
    std::set<std::string> deps;
    std::istringstream words((*it)[3].str());
    for (std::string word; words >> word;)
      if (word.rfind("moepack_", 0) == 0) deps.insert(folder_of_target.at(word));
    ASSERT_TRUE(rooms.uses.count(folder)) << folder << " is a CMake room the table does not list";
    EXPECT_EQ(deps, rooms.uses.at(folder)) << folder;
    ++declared;
  }
  EXPECT_EQ(declared, rooms.folders.size() - 1);  // every room but apps/moepack, the executable
}

}  // namespace
}  // namespace moepack::test
