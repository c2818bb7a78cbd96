#include "lib/convert/executor.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <cerrno>
#include <fcntl.h>
#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>
#include <unordered_map>

#include <mutex>

#include <tbb/parallel_pipeline.h>
#include <tbb/task_arena.h>

#include "formats/safetensors/writer.h"
#include "lib/core/cancel.h"
#include "lib/core/cpus.h"
#include "lib/core/error.h"
#include "lib/core/hash.h"
#include "lib/core/mapped_file.h"
#include "lib/core/natural_order.h"
#include "lib/core/progress.h"
#include "lib/core/tensor.h"
#include "lib/convert/source_hash.h"

namespace moepack::convert {
namespace fs = std::filesystem;
namespace {

// 1 MiB: what pread brings in is hashed while it is still in the L2 cache.
constexpr uint64_t kCopyChunkBytes = 1u << 20;

struct TensorEntry {
  std::string name;
  DType dtype;
  std::vector<uint64_t> shape;
  uint64_t bytes;
  const PassThroughTensor* pass_through = nullptr;
  const PackedTensorPlan* packed = nullptr;
  artifact::PackedTensor* manifest_slot = nullptr;  // where the packed tensor's file/hash go
};

// "model" for the shared files, "model-rankR" for rank R's: huggingface_hub's
// `model{suffix}.safetensors` naming with the rank in the prefix, so a rank's shards and its
// index (rank_index_file_name) share one pattern.
std::string file_prefix(int rank) { return rank < 0 ? "model" : "model-rank" + std::to_string(rank); }

std::string shard_file_name(int rank, size_t index, size_t count) {
  char buf[96];
  const std::string prefix = file_prefix(rank);
  if (count == 1) return prefix + ".safetensors";
  std::snprintf(buf, sizeof buf, "%s-%05zu-of-%05zu.safetensors", prefix.c_str(), index + 1, count);
  return buf;
}

// Greedy fill in module-path order (model.layers.2 before model.layers.10; otherwise plain name
// order), so the layers are written in the model's own order and the progress line's layer
// count matches the tensor it names; a tensor larger than the cap gets a shard of its own.
std::vector<std::vector<const TensorEntry*>> split_by_size(std::vector<const TensorEntry*> entries, uint64_t cap) {
  std::sort(entries.begin(), entries.end(), [](const TensorEntry* a, const TensorEntry* b) { return module_path_less(a->name, b->name); });
  std::vector<std::vector<const TensorEntry*>> shards;
  uint64_t in_current = 0;
  for (const TensorEntry* e : entries) {
    if (shards.empty() || (in_current > 0 && in_current + e->bytes > cap)) {
      shards.emplace_back();
      in_current = 0;
    }
    shards.back().push_back(e);
    in_current += e->bytes;
  }
  return shards;
}

struct Layout {
  std::vector<TensorEntry> entries;
  std::vector<ShardAssignment> shards;
  std::vector<std::vector<const TensorEntry*>> shard_entries;
};

Layout lay_out(const ConversionPlan& plan, uint64_t max_shard_bytes) {
  Layout out;
  size_t count = plan.pass_through.size();
  for (const auto& l : plan.layers)
    for (const auto& r : l.ranks) count += r.tensors.size();
  out.entries.reserve(count);  // pointers into entries stay valid
  std::map<int, std::vector<const TensorEntry*>> groups;  // rank (-1 common) -> tensors
  for (const auto& p : plan.pass_through) {
    const auto& info = *p.source.info;
    out.entries.push_back({p.name, info.dtype, info.shape, info.num_bytes(), &p, nullptr, nullptr});
    groups[-1].push_back(&out.entries.back());
  }
  for (const auto& l : plan.layers) {
    for (const auto& r : l.ranks) {
      int group = plan.tp_size > 1 ? r.rank : -1;
      for (const auto& t : r.tensors) {
        out.entries.push_back({t.name, t.dtype, t.shape, t.num_experts * t.slab_bytes, nullptr, &t, nullptr});
        groups[group].push_back(&out.entries.back());
      }
    }
  }
  // Every rank's index lists the shared tensors and that rank's own: a name may repeat across
  // ranks (each rank's slice of the same parameter), never within one rank's view.
  std::set<std::string> shared_names;
  if (auto shared = groups.find(-1); shared != groups.end())
    for (const TensorEntry* e : shared->second)
      if (!shared_names.insert(e->name).second) throw_internal("two output tensors named `" + e->name + "`");
  for (const auto& [group, list] : groups) {
    if (group < 0) continue;
    std::set<std::string> rank_names;
    for (const TensorEntry* e : list)
      if (shared_names.count(e->name) || !rank_names.insert(e->name).second)
        throw_internal("two output tensors named `" + e->name + "` in the view of rank " + std::to_string(group));
  }
  for (auto& [group, list] : groups) {
    auto split = split_by_size(list, max_shard_bytes);
    for (size_t i = 0; i < split.size(); ++i) {
      ShardAssignment a;
      a.file_name = shard_file_name(group, i, split.size());
      a.rank = group;
      for (const TensorEntry* e : split[i]) {
        a.tensor_names.push_back(e->name);
        a.data_bytes += e->bytes;
      }
      out.shards.push_back(std::move(a));
      out.shard_entries.push_back(std::move(split[i]));
    }
  }
  return out;
}

// Whole-file reads for hashing and copying go through pread with one buffer, not a mapping, so
// resident memory stays at the buffer size whatever the file size.
class ChunkReader {
 public:
  // Reads [offset, offset + length) of the file (length = everything from offset when omitted).
  explicit ChunkReader(const std::string& path, uint64_t offset = 0, std::optional<uint64_t> length = std::nullopt)
      : path_(path), offset_(offset), left_(length.value_or(UINT64_MAX)) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd_ < 0) throw_io(path, "cannot open", errno);
  }
  ~ChunkReader() { ::close(fd_); }
  // The next chunk; empty at the end of the range or file.
  std::span<const uint8_t> next() {
    buffer_.resize(static_cast<size_t>(kCopyChunkBytes));
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kCopyChunkBytes, left_));
    size_t got = 0;
    while (got < want) {
      ssize_t n = ::pread(fd_, buffer_.data() + got, want - got, static_cast<off_t>(offset_ + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw_io(path_, "read failed", errno);
      if (n == 0) break;
      got += static_cast<size_t>(n);
    }
    offset_ += got;
    left_ -= got;
    return {buffer_.data(), got};
  }
  uint64_t left() const { return left_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t offset_;
  uint64_t left_;
  std::vector<uint8_t> buffer_;
};

// `stop`, when given and set, ends the read early; the (partial) entry is then meaningless and
// the caller discards it.
artifact::FileEntry hash_file(const std::string& path, const std::string& name, const std::atomic<bool>* stop = nullptr) {
  ChunkReader in(path);
  Xxh3Stream h;
  uint64_t total = 0;
  for (auto chunk = in.next(); !chunk.empty(); chunk = in.next()) {
    throw_if_cancelled();
    if (stop && stop->load(std::memory_order_relaxed)) break;
    h.update(chunk);
    total += chunk.size();
  }
  return {name, total, h.hex()};
}

artifact::FileEntry copy_file_hashed(const std::string& from, const std::string& to, const std::string& name) {
  ChunkReader in(from);
  std::string partial = to + ".partial";
  std::ofstream out(partial, std::ios::binary | std::ios::trunc);
  if (!out) throw_io(partial, "cannot create", errno);
  Xxh3Stream h;
  uint64_t total = 0;
  for (auto chunk = in.next(); !chunk.empty(); chunk = in.next()) {
    throw_if_cancelled();
    h.update(chunk);
    total += chunk.size();
    out.write(reinterpret_cast<const char*>(chunk.data()), static_cast<std::streamsize>(chunk.size()));
    if (!out) throw_io(partial, "write failed (disk full?)", errno);
  }
  out.close();
  if (!out) throw_io(partial, "write failed (disk full?)", errno);
  std::error_code ec;
  fs::rename(partial, to, ec);
  if (ec) throw_io(to, "cannot rename into place: " + ec.message(), 0);
  return {name, total, h.hex()};
}

// A safetensors index of the artifact (formats/safetensors' text), hashed for the manifest.
artifact::FileEntry write_index(const std::string& staging_dir, const std::string& file_name,
                                const std::map<std::string, std::string>& weight_map, uint64_t total_size) {
  const std::string path = staging_dir + "/" + file_name;
  st::write_shard_index(path, weight_map, total_size);
  return hash_file(path, file_name);
}

// The threads every tensor's pipeline runs on, and the buffers the pipelines fill: one set for
// the whole run, each buffer kept at the largest size it was given, so that the buffers follow
// the largest slab, not the number of tensors or artifacts written, and are not allocated again
// for every tensor.
struct Workers {
  tbb::task_arena& arena;
  int threads = 1;
  std::vector<std::vector<uint8_t>> buffers;
};

// Items 0..count-1 through a bounded pipeline: `fill(i, buffer)` runs in parallel, `drain(i,
// buffer)` on one thread in item order, so what is written does not depend on the thread count.
// At most 2 x threads buffers are in use, each reused without clearing (`fill` sizes and writes
// it whole); `next_item(i)` runs in order before item i is handed out (cancellation, checks).
// With one thread the stages simply alternate.
template <class NextItem, class Fill, class Drain>
void ordered_pipeline(Workers& workers, uint64_t count, NextItem next_item, Fill fill, Drain drain) {
  tbb::task_arena& arena = workers.arena;
  const size_t tokens = static_cast<size_t>(std::min<uint64_t>(std::max(1, workers.threads) * 2, std::max<uint64_t>(count, 1)));
  if (workers.buffers.size() < tokens) workers.buffers.resize(tokens);
  std::vector<std::vector<uint8_t>*> free_buffers;
  for (size_t i = 0; i < tokens; ++i) free_buffers.push_back(&workers.buffers[i]);
  std::mutex pool_mutex;
  struct Item {
    uint64_t index;
    std::vector<uint8_t>* buffer;
  };
  uint64_t next = 0;
  arena.execute([&] {
    tbb::parallel_pipeline(
        tokens,
        tbb::make_filter<void, Item>(tbb::filter_mode::serial_in_order,
                                     [&](tbb::flow_control& fc) -> Item {
                                       if (next == count) {
                                         fc.stop();
                                         return {};
                                       }
                                       next_item(next);
                                       std::lock_guard<std::mutex> lock(pool_mutex);
                                       std::vector<uint8_t>* buffer = free_buffers.back();  // never empty: one per token
                                       free_buffers.pop_back();
                                       return {next++, buffer};
                                     }) &
            tbb::make_filter<Item, Item>(tbb::filter_mode::parallel,
                                         [&](Item item) {
                                           fill(item.index, *item.buffer);
                                           return item;
                                         }) &
            tbb::make_filter<Item, void>(tbb::filter_mode::serial_in_order, [&](Item item) {
              drain(item.index, *item.buffer);
              std::lock_guard<std::mutex> lock(pool_mutex);
              free_buffers.push_back(item.buffer);
            }));
  });
}

// One packed tensor: experts packed in parallel into slabs (a packer writes every byte of its
// slab, padding included), written in expert order by the stage that also hashes them.
void write_packed(const PackedTensorPlan& t, st::Writer& writer, Workers& workers, ByteProgress& progress,
                  std::string& xxh3_out) {
  Xxh3Stream hash;
  ordered_pipeline(
      workers, t.num_experts, [](uint64_t) { throw_if_cancelled(); },
      [&](uint64_t expert, std::vector<uint8_t>& slab) {
        slab.resize(static_cast<size_t>(t.slab_bytes));  // no-op after the first use
        t.produce(expert, slab);
      },
      [&](uint64_t, std::vector<uint8_t>& slab) {
        writer.write(slab, &hash);
        progress.add(t.slab_bytes);
      });
  xxh3_out = hash.hex();
}

// Non-expert tensors are copied in pieces of 1 MiB: read with checked preads (no mapping of the
// source, whose truncation would be SIGBUS), in parallel ahead of the writer, and written in
// order by one stage that hashes them for the output file and, when the source hasher gives
// this copy the range, for the source shard, while each piece is in cache. The source must not
// have changed since its header was validated (a truncated shard is an I/O error, not a short
// copy): checked before every piece.
void copy_pass_through(const PassThroughTensor& p, size_t source_file, st::Writer& writer, SourceHasher& source_hashes, Workers& workers,
                       ByteProgress& progress) {
  const st::File& file = *p.source.file;
  file.mapping().check_unchanged();
  const uint64_t length = p.source.info->num_bytes();
  struct Claim {
    SourceHasher& hasher;
    size_t segment;
    ~Claim() {
      if (segment != SourceHasher::kNotTaken) hasher.release(segment);
    }
  } claim{source_hashes, source_hashes.claim(source_file, file.header().data_start() + p.source.info->begin)};
  st::Writer::Feed also;
  if (claim.segment != SourceHasher::kNotTaken) also = [&](std::span<const uint8_t> bytes) { source_hashes.feed(claim.segment, bytes); };
  const uint64_t pieces = (length + kCopyChunkBytes - 1) / kCopyChunkBytes;
  ordered_pipeline(
      workers, pieces,
      [&](uint64_t) {
        throw_if_cancelled();
        file.mapping().check_unchanged();
      },
      [&](uint64_t piece, std::vector<uint8_t>& buffer) {
        buffer.resize(static_cast<size_t>(std::min(kCopyChunkBytes, length - piece * kCopyChunkBytes)));
        p.source.read(piece * kCopyChunkBytes, buffer);
      },
      [&](uint64_t, std::vector<uint8_t>& buffer) {
        writer.write_fed(buffer, also);
        progress.add(buffer.size());
      });
}

// The source hasher for this plan: every shard, and as the ranges its consumers may hash, the
// pass-through tensors in the order the first artifact copies them (its layout's order).
std::unique_ptr<SourceHasher> start_source_hashes(const ConversionPlan& plan, const Layout& layout, uint64_t output_bytes,
                                                  std::unordered_map<const st::File*, size_t>& file_index) {
  std::vector<SourceHasher::File> files;
  for (size_t i = 0; i < plan.source_files.size(); ++i) {
    const std::string& path = plan.source_files[i];
    std::string rel = fs::path(path).lexically_relative(plan.source_root).string();
    if (rel.empty() || rel.rfind("..", 0) == 0) rel = fs::path(path).filename().string();
    uint64_t size = 0;
    if (i < plan.source_mappings.size()) {
      size = plan.source_mappings[i]->mapping().size();
      file_index[plan.source_mappings[i]] = i;
    } else {  // a plan made without the mappings (tests): the file as it is now
      std::error_code ec;
      size = fs::file_size(path, ec);
      if (ec) throw_io(path, "cannot read its size: " + ec.message(), 0);
    }
    files.push_back({path, rel, size});
  }
  std::vector<SourceHasher::Offer> offers;
  uint64_t written = 0;
  for (const auto& entries : layout.shard_entries)
    for (const TensorEntry* e : entries) {
      written += e->bytes;
      if (!e->pass_through) continue;
      const st::TensorRef& src = e->pass_through->source;
      auto file = file_index.find(src.file);
      if (file == file_index.end()) continue;
      offers.push_back({file->second, src.file->header().data_start() + src.info->begin, src.info->num_bytes(), written});
    }
  return std::make_unique<SourceHasher>(std::move(files), offers, output_bytes);
}

}  // namespace

artifact::PackedTensor manifest_entry(const PackedTensorPlan& t) {
  artifact::PackedTensor pt;
  pt.name = t.name;
  pt.dtype = std::string(dtype_name(t.dtype));
  pt.shape = t.shape;
  pt.layout = t.layout;
  pt.canonical_dtype = std::string(dtype_name(t.canonical_dtype));
  pt.canonical_shape = t.canonical_shape;
  pt.per_expert = t.per_expert;
  pt.derived = t.derived;
  pt.value_stage = t.value_stage;
  return pt;
}

namespace {

// The manifest before anything is written: every layer and every packed tensor's entry, whose
// file and hash the shard writer fills in as it writes the tensor (`entry`).
class ManifestSkeleton {
 public:
  explicit ManifestSkeleton(const ConversionPlan& plan) {
    manifest_.moepack_version = MOEPACK_VERSION_STRING;
    manifest_.reference = artifact::kReferencePoint;
    manifest_.source_scheme = plan.source_scheme;
    manifest_.source_scheme_description = plan.source_scheme_description;
    manifest_.source_model_id = plan.source_model_id;
    manifest_.source_revision = plan.source_revision;
    manifest_.source_commit = plan.source_commit;
    manifest_.target = plan.target;
    for (size_t li = 0; li < plan.layers.size(); ++li) {
      artifact::Layer l = plan.layers[li].manifest;
      l.ranks.clear();
      for (const auto& r : plan.layers[li].ranks) {
        artifact::RankTensors rt;
        rt.rank = r.rank;
        for (const auto& t : r.tensors) {
          rt.tensors.emplace(t.role, manifest_entry(t));
          slot_of_[&t] = {li, {r.rank, t.role}};
        }
        l.ranks.push_back(std::move(rt));
      }
      manifest_.layers.push_back(std::move(l));
    }
  }

  artifact::Manifest& manifest() { return manifest_; }

  artifact::PackedTensor& entry(const PackedTensorPlan* t) {
    auto& [li, key] = slot_of_.at(t);
    for (auto& rt : manifest_.layers[li].ranks)
      if (rt.rank == key.first) return rt.tensors.at(key.second);
    throw_internal("manifest slot missing for " + t->name);
  }

 private:

  artifact::Manifest manifest_;
  std::unordered_map<const PackedTensorPlan*, std::pair<size_t, std::pair<int, std::string>>> slot_of_;  // -> layer, (rank, role)
};

// Which file holds each tensor, for the indexes: the tensors every rank shares, and each rank's
// own, with their bytes.
struct IndexMaps {
  std::map<std::string, std::string> shared;  // tensor name -> file
  uint64_t shared_bytes = 0;
  std::map<int, std::map<std::string, std::string>> per_rank;
  std::map<int, uint64_t> rank_bytes;
};

// One artifact being written: its files' layout, its manifest, and a cursor over its tensors in
// write order (shard after shard, each shard's tensors in module-path order). Each call to
// write_next writes one tensor, opening its shard before the first and committing it after the
// last, so several artifacts can advance side by side (execute_plans).
class ArtifactWriter {
 public:
  ArtifactWriter(const ConversionPlan& plan, std::string staging_dir, std::string label, uint64_t max_shard_bytes)
      : plan_(plan), staging_dir_(std::move(staging_dir)), label_(std::move(label)), layout_(lay_out(plan, max_shard_bytes)), skeleton_(plan) {
    for (const TensorEntry& e : layout_.entries) total_bytes_ += e.bytes;
    skip_empty_shards();
  }

  const ConversionPlan& plan() const { return plan_; }
  const Layout& layout() const { return layout_; }
  uint64_t total_bytes() const { return total_bytes_; }
  bool done() const { return shard_ == layout_.shards.size(); }
  const TensorEntry& next() const { return *layout_.shard_entries[shard_][entry_]; }

  // Writes the next tensor. `source_file`: the index of a pass-through tensor's shard in the
  // source hasher's files, or SourceHasher::kNotTaken when this writer does not feed it.
  void write_next(Workers& workers, SourceHasher& source_hashes, size_t source_file, ByteProgress& progress) {
    const ShardAssignment& shard = layout_.shards[shard_];
    const TensorEntry& e = next();
    if (!writer_) {
      std::vector<st::TensorSpec> specs;
      for (const TensorEntry* t : layout_.shard_entries[shard_]) specs.push_back({t->name, t->dtype, t->shape});
      writer_ = std::make_unique<st::Writer>(staging_dir_ + "/" + shard.file_name, specs, std::map<std::string, std::string>{{"format", "pt"}},
                                             st::Durability::deferred);
    }
    if (e.pass_through) {
      progress.set_activity("copying " + e.name + label_);
      copy_pass_through(*e.pass_through, source_file, *writer_, source_hashes, workers, progress);
    } else {
      artifact::PackedTensor& pt = skeleton_.entry(e.packed);
      pt.file = shard.file_name;
      progress.set_activity("packing " + e.name + " (" + std::to_string(e.packed->num_experts) + " experts)" + label_, true);
      write_packed(*e.packed, *writer_, workers, progress, pt.xxh3);
    }
    (shard.rank < 0 ? maps_.shared : maps_.per_rank[shard.rank])[e.name] = shard.file_name;
    (shard.rank < 0 ? maps_.shared_bytes : maps_.rank_bytes[shard.rank]) += e.bytes;
    if (++entry_ == layout_.shard_entries[shard_].size()) {
      writer_->commit();
      skeleton_.manifest().files.push_back({shard.file_name, writer_->total_bytes(), writer_->file_xxh3()});
      writer_.reset();
      entry_ = 0;
      ++shard_;
      skip_empty_shards();
    }
  }

  // After the last tensor: the indexes, the other files, the source identity and the manifest.
  artifact::Manifest finish(const std::vector<artifact::FileEntry>& source_files);

 private:
  void skip_empty_shards() {
    while (shard_ < layout_.shards.size() && layout_.shard_entries[shard_].empty()) ++shard_;
  }

  const ConversionPlan& plan_;
  std::string staging_dir_;
  std::string label_;  // " for sm90" in the progress line when several artifacts are written
  Layout layout_;
  ManifestSkeleton skeleton_;
  IndexMaps maps_;
  uint64_t total_bytes_ = 0;
  size_t shard_ = 0, entry_ = 0;
  std::unique_ptr<st::Writer> writer_;  // the open shard, between its first and last tensor
};

// model.safetensors.index.json, when there is more than one file, lists the tensors every rank
// shares (with one rank: all of them). Several ranks' packed tensors carry the same names, so no
// single standard index can hold them; each rank gets its own complete one.
void write_indexes(const ConversionPlan& plan, const Layout& layout, const IndexMaps& maps, const std::string& staging_dir, artifact::Manifest& m) {
  if (layout.shards.size() > 1 || plan.tp_size > 1) m.files.push_back(write_index(staging_dir, kIndexFileName, maps.shared, maps.shared_bytes));
  for (const auto& [rank, own] : maps.per_rank) {
    std::map<std::string, std::string> view = maps.shared;
    view.insert(own.begin(), own.end());  // lay_out refused a name both shared and per rank
    m.files.push_back(write_index(staging_dir, rank_index_file_name(rank), view, maps.shared_bytes + maps.rank_bytes.at(rank)));
  }
}

// Every other file of the source directory, byte for byte.
void copy_other_files(const ConversionPlan& plan, const std::string& staging_dir, artifact::Manifest& m) {
  for (const auto& rel : plan.copied_files) {
    throw_if_cancelled();
    fs::path dest = fs::path(staging_dir) / rel;
    std::error_code ec;
    fs::create_directories(dest.parent_path(), ec);
    if (ec) throw_io(dest.parent_path().string(), "cannot create directory: " + ec.message(), 0);
    m.files.push_back(copy_file_hashed((fs::path(plan.source_root) / rel).string(), dest.string(), rel));
  }
}

// Source identity: every shard read, hashed whole, and one fingerprint over them.
void record_source_identity(const ConversionPlan& plan, std::vector<artifact::FileEntry> source_files, artifact::Manifest& m) {
  m.source_files = std::move(source_files);
  // The hashes were read beside the conversion; a shard truncated or rewritten after its last
  // tensor was packed would otherwise be recorded with the hash of whatever the reader saw.
  for (const st::File* f : plan.source_mappings) f->mapping().check_unchanged();
  Xxh3Stream fingerprint;
  for (const auto& f : m.source_files) {
    std::string line = f.name + "\n" + std::to_string(f.bytes) + "\n" + f.xxh3 + "\n";
    fingerprint.update(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(line.data()), line.size()));
  }
  m.source_fingerprint = "xxh3-128:" + fingerprint.hex();
}

void write_manifest_file(const std::string& staging_dir, const artifact::Manifest& m) {
  std::string manifest_path = staging_dir + "/" + artifact::kManifestFileName;
  std::ofstream out(manifest_path, std::ios::binary | std::ios::trunc);
  out << artifact::manifest_text(m);
  out.close();
  if (!out) throw_io(manifest_path, "write failed", errno);
}

artifact::Manifest ArtifactWriter::finish(const std::vector<artifact::FileEntry>& source_files) {
  artifact::Manifest& m = skeleton_.manifest();
  write_indexes(plan_, layout_, maps_, staging_dir_, m);
  copy_other_files(plan_, staging_dir_, m);
  std::sort(m.files.begin(), m.files.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  record_source_identity(plan_, source_files, m);
  write_manifest_file(staging_dir_, m);
  return std::move(m);
}

// Several artifacts of one source must read the same shards and copy the same tensors.
void require_one_source(const std::vector<PlannedArtifact>& artifacts) {
  const ConversionPlan& first = *artifacts.front().plan;
  for (const PlannedArtifact& a : artifacts) {
    if (a.plan->source_files != first.source_files) throw_internal("execute_plans: the plans read different source files");
    if (a.plan->pass_through.size() != first.pass_through.size()) throw_internal("execute_plans: the plans copy different tensors");
  }
}

}  // namespace

std::string rank_index_file_name(int rank) { return file_prefix(rank) + ".safetensors.index.json"; }

std::vector<ShardAssignment> assign_shards(const ConversionPlan& plan, uint64_t max_shard_bytes) {
  return lay_out(plan, max_shard_bytes).shards;
}

artifact::Manifest execute_plan(const ConversionPlan& plan, const std::string& staging_dir, const ExecutorOptions& options) {
  return std::move(execute_plans({{&plan, staging_dir, ""}}, options).front());
}

std::vector<artifact::Manifest> execute_plans(const std::vector<PlannedArtifact>& artifacts, const ExecutorOptions& options) {
  if (artifacts.empty()) return {};
  require_one_source(artifacts);
  // By default as many threads as the CPUs this process may use (affinity mask, cgroup quota).
  const int threads = thread_count(options.threads);
  // More workers than cores only adds contention (and a TBB warning); the batch size still
  // follows `threads`, which does not change the output bytes.
  tbb::task_arena arena(std::min<int>(threads, static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))));
  Workers workers{arena, threads, {}};
  std::vector<std::unique_ptr<ArtifactWriter>> writers;
  uint64_t total_bytes = 0;
  for (const PlannedArtifact& a : artifacts) {
    writers.push_back(std::make_unique<ArtifactWriter>(*a.plan, a.staging_dir, a.label.empty() ? "" : " for " + a.label, options.max_shard_bytes));
    total_bytes += writers.back()->total_bytes();
  }
  const ConversionPlan& first = *artifacts.front().plan;

  // A layer is done when the last of its packed tensors is written, in every artifact. With one
  // rank the layers come in module-path order, one after the other; with several, each rank's
  // files hold every layer again, and a layer is done in the last rank's.
  std::unordered_map<std::string, size_t> tensors_left;  // layer prefix -> packed tensors still to write
  for (const PlannedArtifact& a : artifacts)
    for (const LayerPlan& l : a.plan->layers)
      for (const RankPlan& r : l.ranks) tensors_left[l.manifest.prefix] += r.tensors.size();
  std::unordered_map<const PackedTensorPlan*, std::string> layer_of;
  for (const PlannedArtifact& a : artifacts)
    for (const LayerPlan& l : a.plan->layers)
      for (const RankPlan& r : l.ranks)
        for (const PackedTensorPlan& t : r.tensors) layer_of[&t] = l.manifest.prefix;
  ByteProgress progress(options.show_progress, total_bytes, first.layers.size(), "layer");

  // The source's identity (every shard hashed whole) is computed once, beside the conversion:
  // ranges that the first artifact copies are hashed from its own pieces, the rest by a reader
  // thread. On an error its destructor stops the reader at once.
  std::unordered_map<const st::File*, size_t> file_index;
  std::unique_ptr<SourceHasher> source_hashes = start_source_hashes(first, writers.front()->layout(), writers.front()->total_bytes(), file_index);

  // The artifacts advance side by side: each step writes, in every artifact whose next tensor
  // has it, the tensor that comes first in module-path order. The artifacts of one source hold
  // the same names in the same order (the packed roles aside), so a source tensor is read from
  // disk once and found in the page cache by the other artifacts; its pages are let go after the
  // step, so what stays mapped is one tensor's source, as for one artifact.
  while (true) {
    const TensorEntry* lowest = nullptr;
    for (const auto& w : writers)
      if (!w->done() && (!lowest || module_path_less(w->next().name, lowest->name))) lowest = &w->next();
    if (!lowest) break;
    const std::string step = lowest->name;
    bool packed = false;
    for (size_t i = 0; i < writers.size(); ++i) {
      ArtifactWriter& w = *writers[i];
      if (w.done() || w.next().name != step) continue;
      const TensorEntry& e = w.next();
      size_t source_file = SourceHasher::kNotTaken;
      if (i == 0 && e.pass_through)
        if (auto f = file_index.find(e.pass_through->source.file); f != file_index.end()) source_file = f->second;
      w.write_next(workers, *source_hashes, source_file, progress);
      if (e.packed) {
        packed = true;
        if (--tensors_left[layer_of.at(e.packed)] == 0) progress.unit_done();
      }
    }
    if (packed)
      for (const st::File* f : first.source_mappings) f->drop_resident_pages();
  }

  const std::vector<artifact::FileEntry> source_files = source_hashes->finish();
  std::vector<artifact::Manifest> manifests;
  for (auto& w : writers) manifests.push_back(w->finish(source_files));
  progress.finish();  // the CLI prints the summary line
  return manifests;
}

}  // namespace moepack::convert
