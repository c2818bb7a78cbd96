#include "formats/safetensors/file.h"

#include <algorithm>
#include <unordered_set>
#include <cstring>
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

void File::read(const TensorInfo& t, uint64_t offset, std::span<uint8_t> dst) const {
  if (offset > t.num_bytes() || dst.size() > t.num_bytes() - offset)
    throw Error(ErrorKind::internal, map_.path() + ": " + t.name + ": read past the end of the tensor");
  map_.read_at(header_.data_start() + t.begin + offset, dst);
}

std::vector<uint8_t> File::read_all(const TensorInfo& t) const {
  std::vector<uint8_t> out(static_cast<size_t>(t.num_bytes()));  // size checked against the file at open
  read(t, 0, out);
  return out;
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

namespace {

// model.safetensors.index.json straight from SAX events into the weight map: a real index has
// one entry per tensor (about 90,000 for DeepSeek-V3), so no DOM and no second copy. Duplicate
// keys are errors at every level; unknown keys are skipped, their nesting bounded.
class IndexSax {
 public:
  explicit IndexSax(ShardIndex& out) : out_(out) {}
  std::string error, error_tensor;

  bool start_object(std::size_t) { return open(true); }
  bool start_array(std::size_t) { return open(false); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(std::string& k) {
    if (skip_ > 0) return true;
    if (depth_ == 1) {
      if (!root_keys_.insert(k).second) return fail("index: duplicate key `" + k + "`");
      section_ = k == "weight_map" ? Section::weight_map : k == "metadata" ? Section::metadata : Section::other;
      return true;
    }
    if (depth_ == 2 && section_ == Section::weight_map) {
      key_ = std::move(k);
      if (out_.weight_map.count(key_)) return fail("index: duplicate tensor name", key_);
      return true;
    }
    if (depth_ == 2 && section_ == Section::metadata) {
      metadata_key_ = k;
      return true;
    }
    return true;
  }
  bool string(std::string& v) {
    if (skip_ > 0) return true;
    if (depth_ == 1) return value_at_root();
    if (depth_ == 2 && section_ == Section::weight_map) {
      if (std::string why = unusable_shard_name(v); !why.empty()) return fail("index: " + why, key_);
      shards_.insert(v);
      out_.weight_map.emplace(std::move(key_), std::move(v));
    }
    return true;
  }
  bool number_unsigned(nlohmann::json::number_unsigned_t v) {
    if (skip_ > 0) return true;
    if (depth_ == 1) return value_at_root();
    if (depth_ == 2 && section_ == Section::metadata && metadata_key_ == "total_size") {
      out_.has_total_size = true;
      out_.total_size = v;
    }
    return scalar_in_map();
  }
  bool number_integer(nlohmann::json::number_integer_t) { return other_scalar(); }
  bool number_float(nlohmann::json::number_float_t, const std::string&) { return other_scalar(); }
  bool boolean(bool) { return other_scalar(); }
  bool null() { return other_scalar(); }
  bool binary(nlohmann::json::binary_t&) { return fail("index: unexpected binary value"); }
  bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception& ex) {
    if (error.empty()) error = "invalid JSON: " + std::string(ex.what()) + " (byte " + std::to_string(pos) + ")";
    return false;
  }
  void finish() { out_.shard_names.assign(shards_.begin(), shards_.end()); }
  bool saw_weight_map() const { return saw_weight_map_; }

 private:
  enum class Section { weight_map, metadata, other };

  bool open(bool is_object) {
    if (++depth_ > kMaxConfigJsonDepth) return fail("invalid JSON: nesting deeper than " + std::to_string(kMaxConfigJsonDepth));
    if (skip_ > 0) { ++skip_; return true; }
    if (depth_ == 1) return is_object || fail("index: the document is not a JSON object");
    if (depth_ == 2) {
      if (section_ == Section::weight_map) {
        if (!is_object) return fail("index: `weight_map` is missing or not an object");
        saw_weight_map_ = true;
        return true;
      }
      if (section_ == Section::metadata && is_object) return true;
      skip_ = 1;
      return true;
    }
    if (depth_ == 3 && section_ == Section::weight_map) return fail("index: the shard name is not a string", key_);
    skip_ = 1;
    return true;
  }
  bool close() {
    --depth_;
    if (skip_ > 0) --skip_;
    return true;
  }
  bool value_at_root() {
    if (section_ == Section::weight_map) return fail("index: `weight_map` is missing or not an object");
    return true;
  }
  bool scalar_in_map() {
    if (depth_ == 2 && section_ == Section::weight_map) return fail("index: the shard name is not a string", key_);
    return true;
  }
  bool other_scalar() {
    if (skip_ > 0) return true;
    if (depth_ == 0) return fail("index: the document is not a JSON object");
    if (depth_ == 1) return value_at_root();
    return scalar_in_map();
  }
  bool fail(const std::string& why, const std::string& tensor = "") {
    if (error.empty()) {
      error = why;
      error_tensor = tensor;
    }
    return false;
  }

  ShardIndex& out_;
  int depth_ = 0;
  int skip_ = 0;
  Section section_ = Section::other;
  bool saw_weight_map_ = false;
  std::string key_, metadata_key_;
  std::unordered_set<std::string> root_keys_;
  std::set<std::string> shards_;
};

}  // namespace

ShardIndex parse_shard_index(const std::string& path) {
  std::vector<uint8_t> bytes = read_config_file_bytes(path);
  check_json_bytes(bytes, path);
  ShardIndex idx;
  IndexSax sax(idx);
  const char* first = reinterpret_cast<const char*>(bytes.data());
  if (!nlohmann::json::sax_parse(first, first + bytes.size(), &sax, nlohmann::json::input_format_t::json, true, false))
    throw_bad_input(path, sax.error_tensor, sax.error.empty() ? "invalid JSON" : sax.error);
  if (!sax.saw_weight_map()) throw_bad_input(path, "", "index: `weight_map` is missing or not an object");
  sax.finish();
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
  size_t total = 0;
  for (const auto& f : files_) total += f->header().tensors.size();
  by_name_.reserve(total);
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
      if (!by_name_.count(std::string_view(name)))
        throw_bad_input((fs::path(path) / shard).string(), name, "named in model.safetensors.index.json but not present in that shard");
  }
  std::sort(unindexed_.begin(), unindexed_.end());
}

std::optional<TensorRef> ShardSet::find(std::string_view name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> ShardSet::names() const {
  std::vector<std::string> out;
  out.reserve(by_name_.size());
  for (const auto& [n, _] : by_name_) out.emplace_back(n);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace moepack::st
