#include "formats/artifact/diff.h"

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include "formats/artifact/manifest.h"
#include "lib/core/error.h"

namespace moepack::artifact {
namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

bool DiffReport::identical() const {
  return only_in_a.empty() && only_in_b.empty() && different.empty() && manifest.empty() && files_only_in_a.empty() && files_only_in_b.empty() &&
         files_different.empty();
}

namespace {

// ---- one side's tensors ---------------------------------------------------------------------

struct Side {
  DiffSide info;
  std::optional<Manifest> manifest;
  std::unique_ptr<st::ShardSet> shards;            // a checkpoint
  std::vector<std::unique_ptr<st::File>> files;    // an artifact's safetensors files
  struct Ref {
    const st::File* file;
    const st::TensorInfo* info;
    std::string file_name;
  };
  std::map<std::string, Ref> tensors;
  bool is_directory = false;
};

bool is_directory(const std::string& path) {
  std::error_code ec;
  const bool dir = fs::is_directory(path, ec);
  return dir && !ec;
}

std::unique_ptr<Side> open_side(const std::string& path) {
  auto s = std::make_unique<Side>();
  s->info.path = path;
  s->is_directory = is_directory(path);
  const std::string manifest_path = (fs::path(path) / kManifestFileName).string();
  std::error_code ec;
  if (s->is_directory && fs::is_regular_file(manifest_path, ec)) {
    s->info.kind = "artifact";
    s->manifest = read_manifest(manifest_path);
    // Packed tensors of a layer with several ranks carry the same name in every rank's file.
    std::map<std::string, int> rank_of_file;
    for (const auto& layer : s->manifest->layers)
      if (layer.ranks.size() > 1)
        for (const auto& rank : layer.ranks)
          for (const auto& [role, t] : rank.tensors) rank_of_file.emplace(t.file, rank.rank);
    for (const auto& fe : s->manifest->files) {
      if (!fe.name.ends_with(".safetensors")) continue;
      if (!fs::is_regular_file(fs::path(path) / fe.name, ec)) throw_bad_input(manifest_path, fe.name, "listed in the manifest's files but not in the artifact");
      s->files.push_back(std::make_unique<st::File>((fs::path(path) / fe.name).string()));
      const st::File& f = *s->files.back();
      auto rank = rank_of_file.find(fe.name);
      for (const auto& t : f.header().tensors) {
        const std::string key = rank == rank_of_file.end() ? t.name : t.name + "@rank" + std::to_string(rank->second);
        auto [it, added] = s->tensors.emplace(key, Side::Ref{&f, &t, fe.name});
        if (!added) throw_bad_input(f.path(), t.name, "the tensor is also in " + it->second.file_name + " (an artifact holds each tensor once, or once per rank)");
      }
    }
    s->info.safetensors_files = s->files.size();
  } else {
    s->info.kind = "checkpoint";
    s->shards = std::make_unique<st::ShardSet>(path);
    for (const auto& name : s->shards->names()) {
      const st::TensorRef ref = *s->shards->find(name);
      s->tensors.emplace(name, Side::Ref{ref.file, ref.info, fs::path(ref.file->path()).filename().string()});
    }
    s->info.safetensors_files = s->shards->files().size();
  }
  s->info.tensors = s->tensors.size();
  return s;
}

DiffTensor describe(const Side::Ref& r) { return {r.file_name, std::string(dtype_name(r.info->dtype)), r.info->shape}; }

// ---- manifests ------------------------------------------------------------------------------

// Arrays of objects that all carry one of these keys, with distinct values, are matched by it.
std::optional<std::string> match_key(const ojson& a, const ojson& b) {
  for (const char* key : {"prefix", "rank", "name"}) {
    bool ok = true;
    for (const ojson* arr : {&a, &b}) {
      std::set<std::string> seen;
      for (const auto& e : *arr) {
        if (!e.is_object() || !e.contains(key) || !(e[key].is_string() || e[key].is_number_integer()) || !seen.insert(e[key].dump()).second) {
          ok = false;
          break;
        }
      }
      if (!ok) break;
    }
    if (ok) return std::string(key);
  }
  return std::nullopt;
}

std::string key_text(const ojson& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

void diff_json(const ojson& a, const ojson& b, const std::string& path, std::vector<ManifestDifference>& out) {
  if (a == b) return;
  auto child = [&](const std::string& seg) { return path.empty() ? seg : path + "." + seg; };
  if (a.is_object() && b.is_object()) {
    for (const auto& [k, va] : a.items()) {
      if (b.contains(k)) diff_json(va, b[k], child(k), out);
      else out.push_back({child(k), va, std::nullopt});
    }
    for (const auto& [k, vb] : b.items())
      if (!a.contains(k)) out.push_back({child(k), std::nullopt, vb});
    return;
  }
  if (a.is_array() && b.is_array() && !a.empty() && !b.empty() && a[0].is_object()) {
    if (auto key = match_key(a, b)) {
      std::map<std::string, const ojson*> in_b;
      for (const auto& e : b) in_b.emplace(key_text(e[*key]), &e);
      std::set<std::string> in_a;
      for (const auto& e : a) {
        const std::string k = key_text(e[*key]);
        in_a.insert(k);
        auto it = in_b.find(k);
        if (it != in_b.end()) diff_json(e, *it->second, path + "[" + k + "]", out);
        else out.push_back({path + "[" + k + "]", e, std::nullopt});
      }
      for (const auto& e : b)
        if (!in_a.count(key_text(e[*key]))) out.push_back({path + "[" + key_text(e[*key]) + "]", std::nullopt, e});
      return;
    }
  }
  out.push_back({path, a, b});
}

// ---- other files ----------------------------------------------------------------------------

std::map<std::string, std::string> other_files(const std::string& dir) {
  std::map<std::string, std::string> names;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    const std::string name = it->path().filename().string();
    if (!it->is_regular_file(type_ec) || name.ends_with(".safetensors") || name == kManifestFileName) continue;
    names.emplace(name, it->path().string());
  }
  if (ec) throw_io(dir, "cannot list the directory", ec.value());
  return names;
}

std::optional<FileDifference> compare_files(const std::string& name, const std::string& pa, const std::string& pb) {
  std::ifstream fa(pa, std::ios::binary), fb(pb, std::ios::binary);
  if (!fa) throw_io(pa, "cannot open", errno);
  if (!fb) throw_io(pb, "cannot open", errno);
  std::vector<char> ba(1 << 20), bb(1 << 20);
  uint64_t offset = 0;
  std::optional<uint64_t> first;
  while (true) {
    fa.read(ba.data(), static_cast<std::streamsize>(ba.size()));
    fb.read(bb.data(), static_cast<std::streamsize>(bb.size()));
    if (fa.bad()) throw_io(pa, "cannot read", errno);
    if (fb.bad()) throw_io(pb, "cannot read", errno);
    const auto na = static_cast<uint64_t>(fa.gcount()), nb = static_cast<uint64_t>(fb.gcount());
    for (uint64_t i = 0; !first && i < std::min(na, nb); ++i)
      if (ba[i] != bb[i]) first = offset + i;
    if (!first && na != nb) first = offset + std::min(na, nb);
    offset += std::min(na, nb);
    if (first || na == 0 || nb == 0) break;
  }
  if (!first) return std::nullopt;
  std::error_code ec;
  const uint64_t sa = fs::file_size(pa, ec), sb = fs::file_size(pb, ec);
  return FileDifference{name, sa, sb, *first};
}

}  // namespace

DiffReport diff(const std::string& a_path, const std::string& b_path) {
  const std::unique_ptr<Side> a = open_side(a_path), b = open_side(b_path);
  DiffReport r;
  r.a = a->info;
  r.b = b->info;
  for (const auto& [key, ra] : a->tensors) {
    auto it = b->tensors.find(key);
    if (it == b->tensors.end()) {
      r.only_in_a.push_back({key, describe(ra)});
      continue;
    }
    const Side::Ref& rb = it->second;
    ++r.tensors_compared;
    st::TensorComparison c = st::compare_tensors(*ra.file, *ra.info, *rb.file, *rb.info);
    if (c.identical()) ++r.tensors_identical;
    else r.different.push_back({key, describe(ra), describe(rb), c});
  }
  for (const auto& [key, rb] : b->tensors)
    if (!a->tensors.count(key)) r.only_in_b.push_back({key, describe(rb)});

  if (a->manifest && b->manifest) {
    r.manifests_compared = true;
    diff_json(to_json(*a->manifest), to_json(*b->manifest), "", r.manifest);
  }
  if (a->is_directory && b->is_directory) {
    const auto fa = other_files(a_path), fb = other_files(b_path);
    for (const auto& [name, pa] : fa) {
      auto it = fb.find(name);
      if (it == fb.end()) r.files_only_in_a.push_back(name);
      else if (auto d = compare_files(name, pa, it->second)) r.files_different.push_back(*d);
    }
    for (const auto& [name, pb] : fb)
      if (!fa.count(name)) r.files_only_in_b.push_back(name);
  }
  return r;
}

}  // namespace moepack::artifact
