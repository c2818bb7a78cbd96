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

// A shard name from an index must stay inside the checkpoint directory.
bool is_safe_relative_name(const std::string& name) {
  if (name.empty() || name.front() == '/') return false;
  fs::path p(name);
  for (const auto& part : p)
    if (part == "..") return false;
  return true;
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
    if (!is_safe_relative_name(shard))
      throw_bad_input(path, it.key(), "index: shard name `" + shard + "` points outside the checkpoint directory");
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

ShardSet::ShardSet(const std::string& path) {
  std::error_code ec;
  auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) throw Error(ErrorKind::bad_input, path + ": no such file or directory");
  std::vector<std::string> shard_paths;
  ShardIndex index;
  if (fs::is_directory(status)) {
    is_directory_ = true;
    root_ = path;
    std::string index_path = (fs::path(path) / "model.safetensors.index.json").string();
    if (fs::exists(index_path)) {
      has_index_ = true;
      index = parse_shard_index(index_path);
      for (const auto& s : index.shard_names) shard_paths.push_back((fs::path(path) / s).string());
    } else {
      for (const auto& entry : fs::directory_iterator(path)) {
        if (entry.is_regular_file() && entry.path().extension() == ".safetensors") shard_paths.push_back(entry.path().string());
      }
      std::sort(shard_paths.begin(), shard_paths.end());
    }
  } else {
    root_ = fs::path(path).parent_path().string();
    if (root_.empty()) root_ = ".";
    shard_paths.push_back(path);
  }
  for (const auto& p : shard_paths) {
    if (has_index_ && !fs::exists(p)) throw Error(ErrorKind::bad_input, p + ": shard named in model.safetensors.index.json does not exist");
    files_.push_back(std::make_unique<File>(p));
  }
  for (const auto& f : files_) {
    std::string shard_name = fs::path(f->path()).filename().string();
    for (const auto& t : f->header().tensors) {
      if (has_index_) {
        auto it = index.weight_map.find(t.name);
        if (it == index.weight_map.end()) { unindexed_.push_back(t.name); continue; }
        if (fs::path(it->second).filename() != shard_name) continue;  // the index points elsewhere; that shard decides
      }
      if (!by_name_.emplace(t.name, TensorRef{f.get(), &t}).second)
        throw_bad_input(f->path(), t.name, "tensor name appears in more than one shard");
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
