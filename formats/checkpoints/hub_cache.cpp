#include "formats/checkpoints/hub_cache.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <pwd.h>
#include <unistd.h>
#include <utility>
#include <vector>

#include "lib/core/error.h"

namespace moepack::ckpt {
namespace fs = std::filesystem;
namespace {

// A refs/ file holds one commit hash (40 hex digits, 64 for SHA-256 repositories); anything much
// longer is not a ref, and is not read whole.
constexpr std::streamsize kLongestRef = 256;

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

std::string home_directory() {
  if (std::string home = env("HOME"); !home.empty()) return home;
  if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir) return pw->pw_dir;
  return "~";
}

// Python's os.path.expanduser: `~` or `~user` at the start, up to the first `/`.
std::string expand_user(const std::string& path) {
  if (path.empty() || path[0] != '~') return path;
  const size_t slash = path.find('/');
  const std::string user = path.substr(1, slash == std::string::npos ? std::string::npos : slash - 1);
  std::string home;
  if (user.empty()) home = home_directory();
  else if (const passwd* pw = ::getpwnam(user.c_str()); pw && pw->pw_dir) home = pw->pw_dir;
  else return path;  // an unknown user: left as it is
  return home + (slash == std::string::npos ? "" : path.substr(slash));
}

bool is_word(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// Python's posixpath.expandvars: $NAME and ${NAME} replaced by the variable's value; a variable
// that is not set leaves the text as it is.
std::string expand_vars(const std::string& path) {
  std::string out;
  size_t i = 0;
  while (i < path.size()) {
    if (path[i] != '$') {
      out += path[i++];
      continue;
    }
    size_t name_begin = i + 1, name_end = name_begin, resume = name_begin;
    if (name_begin < path.size() && path[name_begin] == '{') {
      const size_t close = path.find('}', name_begin + 1);
      if (close == std::string::npos) {
        out += path[i++];
        continue;
      }
      name_begin += 1;
      name_end = close;
      resume = close + 1;
    } else {
      while (name_end < path.size() && is_word(path[name_end])) ++name_end;
      resume = name_end;
    }
    const std::string name = path.substr(name_begin, name_end - name_begin);
    const char* value = name.empty() ? nullptr : std::getenv(name.c_str());
    if (value) out += value;
    else out += path.substr(i, resume - i);
    i = resume;
  }
  return out;
}

struct CacheDir {
  std::string path;
  std::string chosen_by;  // why this directory, for messages
};

CacheDir find_cache_dir() {
  for (const char* name : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"})
    if (std::string value = env(name); !value.empty()) return {expand_vars(expand_user(value)), std::string("from ") + name};
  if (std::string home = env("HF_HOME"); !home.empty()) return {(fs::path(expand_vars(expand_user(home))) / "hub").string(), "HF_HOME/hub"};
  if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty())
    return {(fs::path(expand_vars(expand_user(xdg + "/huggingface"))) / "hub").string(), "XDG_CACHE_HOME/huggingface/hub"};
  return {(fs::path(home_directory()) / ".cache" / "huggingface" / "hub").string(),
          "~/.cache/huggingface/hub, as none of HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME is set"};
}

// One part of a repo id as the Hub accepts it.
bool valid_id_part(const std::string& part) {
  if (part.empty() || part.size() > 96) return false;
  for (char c : part)
    if (!is_word(c) && c != '-' && c != '.') return false;
  if (part.front() == '-' || part.front() == '.' || part.back() == '-' || part.back() == '.') return false;
  return part.find("--") == std::string::npos && part.find("..") == std::string::npos;
}

// A branch, tag or commit as a relative path under refs/ or snapshots/: no empty, `.` or `..`
// component, so a revision cannot reach outside the model's folder.
bool valid_revision(const std::string& revision) {
  if (revision.empty() || revision.front() == '/') return false;
  size_t begin = 0;
  while (begin <= revision.size()) {
    size_t end = revision.find('/', begin);
    if (end == std::string::npos) end = revision.size();
    const std::string part = revision.substr(begin, end - begin);
    if (part.empty() || part == "." || part == "..") return false;
    for (char c : part)
      if (static_cast<unsigned char>(c) < 0x20) return false;
    begin = end + 1;
  }
  return true;
}

struct ModelId {
  std::string repo;      // org/name
  std::string revision;  // empty when none was given
};

ModelId split_model_id(const std::string& text) {
  const size_t at = text.find('@');
  return {text.substr(0, at), at == std::string::npos ? "" : text.substr(at + 1)};
}

bool path_exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(fs::status(path, ec));
}

bool directory_exists(const fs::path& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

bool regular_file_exists(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

// The commit a refs/ file holds, read as huggingface_hub reads it: the whole file, as it is.
std::string read_ref(const fs::path& ref_file) {
  std::ifstream in(ref_file, std::ios::binary);
  if (!in) throw_io(ref_file.string(), "cannot read", errno);
  std::string commit(static_cast<size_t>(kLongestRef) + 1, '\0');
  in.read(commit.data(), kLongestRef + 1);
  commit.resize(static_cast<size_t>(in.gcount()));
  if (in.bad()) throw_io(ref_file.string(), "cannot read", errno);
  if (commit.size() > static_cast<size_t>(kLongestRef))
    throw_bad_input(ref_file.string(), "", "longer than " + std::to_string(kLongestRef) + " bytes; a ref holds one commit hash");
  if (!valid_revision(commit) || commit.find('/') != std::string::npos)
    throw_bad_input(ref_file.string(), "", "holds `" + commit + "`, which is not a commit hash (a snapshot directory name)");
  return commit;
}

}  // namespace

std::string hub_cache_dir() { return find_cache_dir().path; }

bool looks_like_model_id(const std::string& text) {
  const ModelId id = split_model_id(text);
  const size_t slash = id.repo.find('/');
  if (slash == std::string::npos || id.repo.find('/', slash + 1) != std::string::npos) return false;
  if (!valid_id_part(id.repo.substr(0, slash)) || !valid_id_part(id.repo.substr(slash + 1))) return false;
  return text.find('@') == std::string::npos || valid_revision(id.revision);
}

CheckpointLocation locate_checkpoint(const std::string& argument) {
  CheckpointLocation location;
  location.path = argument;
  // Not there and not an id: the reader's own "no such file or directory" says it best.
  if (path_exists(argument) || !looks_like_model_id(argument)) return location;

  const ModelId id = split_model_id(argument);
  const CacheDir cache = find_cache_dir();
  const std::string revision = id.revision.empty() ? "main" : id.revision;
  std::string folder_name = "models--" + id.repo;
  folder_name.replace(folder_name.find('/'), 1, "--");
  const fs::path repo = fs::path(cache.path) / folder_name;
  if (!directory_exists(repo))
    throw Error(ErrorKind::bad_input, argument + ": no such file or directory, and no model `" + id.repo + "` in the local Hugging Face cache (" +
                                          repo.string() + " does not exist; the cache is " + cache.path + ", " + cache.chosen_by +
                                          "). moepack never downloads: `hf download " + id.repo + "` puts it there");

  // A branch or tag is a file under refs/; any other revision (a full commit hash) is taken
  // as the snapshot's name, as huggingface_hub does.
  const fs::path ref_file = repo / "refs" / revision;
  const bool has_ref = regular_file_exists(ref_file);
  const std::string commit = has_ref ? read_ref(ref_file) : revision;
  const fs::path snapshot = repo / "snapshots" / commit;
  if (!directory_exists(snapshot)) {
    if (has_ref)
      throw Error(ErrorKind::bad_input, argument + ": " + ref_file.string() + " names commit " + commit + ", but " + snapshot.string() +
                                            " does not exist (the download did not finish, or the cache was pruned)");
    throw Error(ErrorKind::bad_input, argument + ": the local Hugging Face cache has `" + id.repo + "` but not revision `" + revision + "` (neither " +
                                          ref_file.string() + " nor " + snapshot.string() + " exists)");
  }
  location.path = snapshot.string();
  location.model_id = id.repo;
  location.revision = revision;
  location.commit = commit;
  return location;
}

}  // namespace moepack::ckpt
