#include "formats/safetensors/file.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "formats/safetensors/strict_json.h"

namespace moepack::st {
namespace fs = std::filesystem;

File::File(const std::string& path) : map_(path) {
  auto bytes = map_.bytes();
  // Only the header region is touched here; the data region may be a sparse hole.
  header_ = parse_header(bytes, path);
  by_name_.reserve(header_.tensors.size());
  for (size_t i = 0; i < header_.tensors.size(); ++i) by_name_.emplace(header_.tensors[i].name, i);
}

const TensorInfo* File::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &header_.tensors[it->second];
}

std::span<const uint8_t> File::data(const TensorInfo& t) const {
  map_.check_unchanged();
  return map_.bytes().subspan(static_cast<size_t>(header_.data_start() + t.begin), static_cast<size_t>(t.num_bytes()));
}

namespace {

// Why a shard name from an index cannot be opened as named, or "" when it can. A shard must
// stay inside the checkpoint directory; a NUL byte (JSON "\u0000") would cut the name short at
// open(), so the file read would not be the one the index names.
std::string unusable_shard_name(const std::string& name) {
  if (name.empty()) return "the shard name is empty";
  if (name.find('\0') != std::string::npos) return "the shard name contains a NUL byte";
  if (name.front() == '/') return "shard name `" + name + "` is an absolute path";
  fs::path p(name);
  for (const auto& part : p)
    if (part == "..") return "shard name `" + name + "` points outside the checkpoint directory";
  return "";
}

}  // namespace

ShardIndex parse_shard_index(const std::string& path) {
  nlohmann::json j = read_strict_json_file(path);
  if (!j.is_object()) throw_bad_input(path, "", "index: the document is not a JSON object");
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object()) throw_bad_input(path, "", "index: `weight_map` is missing or not an object");
  ShardIndex idx;
  std::set<std::string> shards;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it.value().is_string()) throw_bad_input(path, it.key(), "index: the shard name is not a string");
    std::string shard = it.value().get<std::string>();
    if (std::string why = unusable_shard_name(shard); !why.empty()) throw_bad_input(path, it.key(), "index: " + why);
    idx.weight_map.emplace(it.key(), shard);
    shards.insert(shard);
  }
  idx.shard_names.assign(shards.begin(), shards.end());
  if (auto md = j.find("metadata"); md != j.end() && md->is_object()) {
    if (auto ts = md->find("total_size"); ts != md->end() && ts->is_number_unsigned()) {
      idx.has_total_size = true;
      idx.total_size = ts->get<uint64_t>();
    }
  }
  return idx;
}

namespace {

// Whether `path` exists; a failure other than "not there" (permission, loop, ...) is an I/O error.
bool path_exists(const std::string& path) {
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
    throw_io(path, "cannot access", ec.value());
  return fs::exists(st);
}

}  // namespace

ShardSet::ShardSet(const std::string& path) {
  if (!path_exists(path)) throw Error(ErrorKind::bad_input, path + ": no such file or directory");
  std::error_code ec;
  bool is_dir = fs::is_directory(path, ec);
  if (ec) throw_io(path, "cannot access", ec.value());
  // Path to open and, with an index, the shard name exactly as the index spells it.
  std::vector<std::pair<std::string, std::string>> shards;
  ShardIndex index;
  if (is_dir) {
    is_directory_ = true;
    root_ = path;
    std::string index_path = (fs::path(path) / "model.safetensors.index.json").string();
    if (path_exists(index_path)) {
      has_index_ = true;
      index = parse_shard_index(index_path);
      for (const auto& s : index.shard_names) shards.emplace_back((fs::path(path) / s).string(), s);
    } else {
      // The error_code overloads: a directory that cannot be listed is an I/O error, not an
      // exception of another type escaping the Error contract.
      fs::directory_iterator it(path, ec), end;
      for (; !ec && it != end; it.increment(ec)) {
        std::error_code type_ec;
        if (it->is_regular_file(type_ec) && it->path().extension() == ".safetensors") shards.emplace_back(it->path().string(), "");
      }
      if (ec) throw_io(path, "cannot list the directory", ec.value());
      std::sort(shards.begin(), shards.end());
    }
  } else {
    root_ = fs::path(path).parent_path().string();
    if (root_.empty()) root_ = ".";
    shards.emplace_back(path, "");
  }
  std::vector<std::string> index_names;  // parallel to files_
  for (const auto& [p, name] : shards) {
    if (has_index_ && !path_exists(p)) throw Error(ErrorKind::bad_input, p + ": shard named in model.safetensors.index.json does not exist");
    files_.push_back(std::make_unique<File>(p));
    index_names.push_back(name);
  }
  for (size_t i = 0; i < files_.size(); ++i) {
    const File& f = *files_[i];
    for (const auto& t : f.header().tensors) {
      if (has_index_) {
        auto it = index.weight_map.find(t.name);
        if (it == index.weight_map.end()) { unindexed_.push_back(t.name); continue; }
        // Compared as the index spells the name: two shards with the same file name in different
        // subdirectories, or `./x` next to `x`, must not both claim a tensor.
        if (it->second != index_names[i]) continue;  // the index points elsewhere; that shard decides
      }
      if (!by_name_.emplace(t.name, TensorRef{&f, &t}).second)
        throw_bad_input(f.path(), t.name, "tensor name appears in more than one shard");
    }
  }
  if (has_index_) {
    for (const auto& [name, shard] : index.weight_map)
      if (!by_name_.count(name))
        throw_bad_input((fs::path(path) / shard).string(), name, "named in model.safetensors.index.json but not present in that shard");
  }
  std::sort(unindexed_.begin(), unindexed_.end());
}

std::optional<TensorRef> ShardSet::find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> ShardSet::names() const {
  std::vector<std::string> out;
  out.reserve(by_name_.size());
  for (const auto& [n, _] : by_name_) out.push_back(n);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace moepack::st
