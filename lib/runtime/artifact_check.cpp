#include "lib/runtime/artifact_check.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include "formats/artifact/manifest.h"
#include "formats/checkpoints/checkpoint.h"
#include "formats/safetensors/file.h"
#include "lib/runtime/artifact_validation.h"
#include "lib/convert/executor.h"
#include "lib/convert/param_loader.h"
#include "lib/convert/reductions.h"
#include "lib/convert/derivations.h"
#include "lib/convert/wna16_marlin.h"
#include "lib/core/cpus.h"
#include "lib/core/error.h"
#include "lib/core/hash.h"
#include "lib/core/mapped_file.h"
#include "lib/core/parallel.h"
#include "lib/core/tensor.h"
#include "packers/registry.h"

namespace moepack::runtime {

// From the conversion room: the loader geometry, derivations, reductions and stages with
// their read-backs, and the artifact's file naming.
using convert::LayerReduction;
using convert::RankGeometry;
using convert::SwigluFacts;
using convert::ValueStage;
using convert::find_reduction;
using convert::find_value_stage;
using convert::holds_fp8_fnuz;
using convert::holds_moe_wna16_scales;
using convert::kIndexFileName;
using convert::load_expert_param;
using convert::make_expert_derivation;
using convert::params_dtype_of_target;
using convert::produce_derived_expert;
using convert::rank_index_file_name;
using convert::reduction_input;
using convert::set_family_geometry;
using convert::set_moe_wna16_geometry;
using convert::source_param_of;

namespace fs = std::filesystem;
// The artifact's safetensors files, each opened (mapped) once however often it is named.
class ArtifactFileCache {
 public:
  explicit ArtifactFileCache(std::string dir) : dir_(std::move(dir)) {}
  const st::File& operator()(const std::string& name) {
    auto& slot = files_[name];
    if (!slot) slot = std::make_unique<st::File>((fs::path(dir_) / name).string());
    return *slot;
  }

 private:
  std::string dir_;
  std::map<std::string, std::unique_ptr<st::File>> files_;
};

namespace {

using OpenFile = std::function<const st::File&(const std::string&)>;

// One index of the artifact: it parses as a standard index (moepack's strict reader refuses
// ".." and absolute names, as huggingface_hub's does), names only files of the artifact, every
// tensor it names is in that file, and total_size is the bytes of those tensors. Returns its
// weight_map (empty when it cannot be read; the reason is in `problems`).
std::unordered_map<std::string, std::string> check_index(const std::string& artifact_dir, const std::string& index_name,
                                                         const std::set<std::string>& artifact_files, const OpenFile& file,
                                                         std::vector<std::string>& problems) {
  st::ShardIndex index;
  try {
    index = st::parse_shard_index((fs::path(artifact_dir) / index_name).string());
  } catch (const Error& e) {
    problems.push_back(index_name + ": " + e.what());
    return {};
  }
  uint64_t listed_bytes = 0;
  for (const auto& [name, shard] : index.weight_map) {
    if (!artifact_files.count(shard)) {
      problems.push_back(index_name + ": `" + name + "` is mapped to " + shard + ", which is not a file of the artifact");
      continue;
    }
    const st::TensorInfo* info = file(shard).find(name);
    if (!info) problems.push_back(index_name + ": `" + name + "` is mapped to " + shard + ", which does not hold it");
    else listed_bytes += info->num_bytes();
  }
  if (index.has_total_size && index.total_size != listed_bytes)
    problems.push_back(index_name + ": metadata.total_size is " + std::to_string(index.total_size) + ", the tensors it lists hold " +
                       std::to_string(listed_bytes) + " bytes");
  return std::move(index.weight_map);
}

// The indexes against the manifest. With one rank, model.safetensors.index.json (when there is
// one) maps each packed tensor to its manifest file. With several, it holds the shared tensors
// only, and rank R's own index is its complete view: every shared entry, plus each of R's packed
// tensors in the file the manifest names.
void check_indexes(const std::string& artifact_dir, const artifact::Manifest& m, const OpenFile& file, ArtifactCheck& out) {
  std::set<std::string> artifact_files;
  for (const auto& f : m.files) artifact_files.insert(f.name);
  std::map<std::string, std::unordered_map<std::string, std::string>> indexes;
  for (const auto& name : artifact_files)
    if (name.ends_with(".safetensors.index.json")) indexes[name] = check_index(artifact_dir, name, artifact_files, file, out.problems);

  const bool several_ranks = std::any_of(m.layers.begin(), m.layers.end(), [](const auto& l) { return l.intermediate_size_scope.has_value(); });
  const auto shared = indexes.find(kIndexFileName);
  for (const auto& layer : m.layers) {
    for (const auto& rank : layer.ranks) {
      const std::string index_name = several_ranks ? rank_index_file_name(rank.rank) : kIndexFileName;
      const auto index = indexes.find(index_name);
      if (index == indexes.end()) {
        if (several_ranks) out.problems.push_back(index_name + ": missing (rank " + std::to_string(rank.rank) + "'s index)");
        continue;  // one rank in one file needs no index
      }
      for (const auto& [role, t] : rank.tensors) {
        auto it = index->second.find(t.name);
        if (it == index->second.end() || it->second != t.file)
          out.problems.push_back(index_name + ": does not map `" + t.name + "` to " + t.file + " as the manifest does");
      }
    }
  }
  if (!several_ranks || shared == indexes.end()) return;
  for (const auto& [name, index] : indexes) {
    if (name == kIndexFileName) continue;
    for (const auto& [tensor, shard] : shared->second) {
      auto it = index.find(tensor);
      if (it == index.end() || it->second != shard)
        out.problems.push_back(name + ": does not map the shared tensor `" + tensor + "` to " + shard + " as " + kIndexFileName + " does");
    }
  }
}


std::string manifest_path_of(const std::string& artifact_dir) { return (fs::path(artifact_dir) / artifact::kManifestFileName).string(); }

// The manifest, validated against itself and its files before any tensor is read.
artifact::Manifest read_artifact_manifest(const std::string& artifact_dir) {
  const std::string path = manifest_path_of(artifact_dir);
  artifact::Manifest m = artifact::read_manifest(path);
  validate_artifact(m, artifact_dir, path);
  return m;
}

// Every file of the directory must be one the manifest lists: the contract is that OUT holds
// the manifest and its `files`, nothing else, so a file the manifest does not vouch for (or an
// entry dropped from `files`) is a difference.
void check_unlisted_files(const std::string& artifact_dir, const artifact::Manifest& m, ArtifactCheck& out) {
  std::set<std::string> listed;
  for (const auto& f : m.files) listed.insert(f.name);
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(artifact_dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::string name = fs::relative(it->path(), artifact_dir, ec).generic_string();
    if (name != artifact::kManifestFileName && !listed.count(name)) out.problems.push_back(name + ": in the artifact but not in the manifest's files");
  }
  if (ec) throw_io(artifact_dir, "cannot list the artifact's files", ec.value());
}

}  // namespace

// One file of the pass: its hash and the hashes of the packed tensors' byte ranges it holds
// (sorted by offset, not overlapping), fed from the same chunks as the pass moves through the
// file, so the bytes are read once. Each chunk's pages are unmapped once hashed: the resident
// set stays one chunk, whatever the file's size (the page cache keeps them for the next reader).
struct ArtifactHashPass::FileState {
  std::string name;
  uint64_t manifest_bytes = 0;
  std::string manifest_xxh3;
  std::unique_ptr<MappedFile> map;  // null until first hashed; stays null when its size is wrong
  std::optional<std::string> size_problem;
  Xxh3Stream whole;
  uint64_t position = 0;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  std::vector<Xxh3Stream> parts;
  size_t first_open = 0;  // ranges before it end before `position`
  bool done = false;

  void hash_until(uint64_t offset, const std::string& dir, const HashedBytes& hashed) {
    if (done) return;
    if (!map) {
      map = std::make_unique<MappedFile>((fs::path(dir) / name).string());
      if (map->size() != manifest_bytes) {
        size_problem = name + ": " + std::to_string(map->size()) + " bytes, the manifest says " + std::to_string(manifest_bytes);
        ranges.clear();  // the tensors are hashed from their own mapping at the end
        parts.clear();
        done = true;
        if (hashed) hashed(manifest_bytes, true);
        return;
      }
    }
    constexpr uint64_t kChunk = uint64_t{32} << 20;
    const std::span<const uint8_t> bytes = map->bytes();
    offset = std::min<uint64_t>(offset, bytes.size());
    while (position < offset) {
      const uint64_t at = position, end = std::min<uint64_t>(bytes.size(), at + kChunk);
      const auto chunk = bytes.subspan(static_cast<size_t>(at), static_cast<size_t>(end - at));
      whole.update(chunk);
      while (first_open < ranges.size() && ranges[first_open].second <= at) ++first_open;
      for (size_t r = first_open; r < ranges.size() && ranges[r].first < end; ++r) {
        const uint64_t b = std::max(at, ranges[r].first), e = std::min(end, ranges[r].second);
        if (b < e) parts[r].update(bytes.subspan(static_cast<size_t>(b), static_cast<size_t>(e - b)));
      }
      map->drop_resident_pages(chunk);
      position = end;
      if (hashed) hashed(end - at, end == bytes.size());
    }
    if (position == bytes.size()) {
      if (bytes.empty() && hashed) hashed(0, true);
      done = true;
    }
  }
};

ArtifactHashPass::ArtifactHashPass(std::string artifact_dir, const artifact::Manifest& m, HashedBytes hashed)
    : dir_(std::move(artifact_dir)), m_(m), hashed_(std::move(hashed)), opened_(std::make_unique<ArtifactFileCache>(dir_)) {
  // The packed tensors' byte ranges, per file, and where each layer's end in each file.
  std::map<std::string, size_t> index;
  for (const auto& f : m.files) {
    auto state = std::make_unique<FileState>();
    state->name = f.name;
    state->manifest_bytes = f.bytes;
    state->manifest_xxh3 = f.xxh3;
    index[f.name] = files_.size();
    files_.push_back(std::move(state));
  }
  std::vector<std::set<std::pair<uint64_t, uint64_t>>> ranges(files_.size());  // empty tensors too
  layer_ends_.assign(m.layers.size(), std::vector<uint64_t>(files_.size(), 0));
  for (size_t li = 0; li < m.layers.size(); ++li)
    for (const auto& rank : m.layers[li].ranks)
      for (const auto& [role, t] : rank.tensors) {
        auto it = index.find(t.file);
        if (it == index.end() || !t.file.ends_with(".safetensors")) continue;
        const st::File& f = (*opened_)(t.file);
        if (const st::TensorInfo* info = f.find(t.name)) {
          const uint64_t begin = f.header().data_start() + info->begin, end = begin + info->num_bytes();
          ranges[it->second].insert({begin, end});
          layer_ends_[li][it->second] = std::max(layer_ends_[li][it->second], end);
        }
      }
  for (size_t i = 0; i < files_.size(); ++i) {
    files_[i]->ranges.assign(ranges[i].begin(), ranges[i].end());
    files_[i]->parts = std::vector<Xxh3Stream>(files_[i]->ranges.size());
  }
}

ArtifactHashPass::~ArtifactHashPass() = default;

void ArtifactHashPass::advance_to_layer(size_t layer_index, int threads) {
  const std::vector<uint64_t>& ends = layer_ends_.at(layer_index);
  std::vector<size_t> behind;
  for (size_t i = 0; i < files_.size(); ++i)
    if (ends[i] > files_[i]->position && !files_[i]->done) behind.push_back(i);
  parallel_for_each_index(behind.size(), threads, [&](uint64_t k) { files_[behind[k]]->hash_until(ends[behind[k]], dir_, hashed_); });
}

void ArtifactHashPass::finish(ArtifactCheck& out, int threads) {
  parallel_for_each_index(files_.size(), threads, [&](uint64_t i) { files_[i]->hash_until(~uint64_t{0}, dir_, hashed_); });
  check_unlisted_files(dir_, m_, out);
  out.files_checked += files_.size();
  for (const auto& f : files_) {
    if (f->size_problem) out.problems.push_back(*f->size_problem);
    else if (f->whole.hex() != f->manifest_xxh3) out.problems.push_back(f->name + ": XXH3-128 differs from the manifest");
  }
  std::map<std::tuple<std::string, uint64_t, uint64_t>, std::string> range_hash;  // (file, begin, end) -> hash
  for (const auto& f : files_)
    for (size_t r = 0; r < f->ranges.size(); ++r) range_hash[{f->name, f->ranges[r].first, f->ranges[r].second}] = f->parts[r].hex();
  ArtifactFileCache& file = *opened_;
  check_indexes(dir_, m_, [&](const std::string& name) -> const st::File& { return file(name); }, out);
  for (const auto& layer : m_.layers)
    for (const auto& rank : layer.ranks)
      for (const auto& [role, t] : rank.tensors) {
        const st::TensorInfo* info = file(t.file).find(t.name);
        const std::string where = t.file + ": " + t.name + " (rank " + std::to_string(rank.rank) + ")";
        if (!info) {
          out.problems.push_back(where + ": missing");
          continue;
        }
        ++out.tensors_checked;
        const uint64_t begin = file(t.file).header().data_start() + info->begin;
        auto known = range_hash.find({t.file, begin, begin + info->num_bytes()});
        const std::string hash = known != range_hash.end() ? known->second : xxh3_128_hex(file(t.file).data(*info));
        if (hash != t.xxh3) out.problems.push_back(where + ": XXH3-128 differs from the manifest");
      }
}

namespace {

// One expert's slab against the source's loaded param: the slab must be exactly what the layout
// packs from it, padding included (the bulk pack paths make this the fast direction; an
// unpack-and-compare would accept any padding). On a difference the slab is unpacked to say
// where: the first canonical byte that differs, or that only the padding does.
std::optional<std::string> compare_slab(const packers::Layout& layout, const OwnedTensor& expected, std::span<const uint8_t> slab,
                                        const std::string& where, uint64_t expert) {
  std::vector<uint8_t> packed(slab.size());
  bool packs = true;
  try {
    layout.pack(expected.view(), packed);
  } catch (const Error&) {
    packs = false;  // a source value the layout refuses: the unpack below names the difference
  }
  if (packs && std::equal(packed.begin(), packed.end(), slab.begin(), slab.end())) return std::nullopt;
  OwnedTensor got(expected.dtype, expected.shape);
  layout.unpack(slab, got);
  if (got.bytes != expected.bytes) {
    auto diff = std::mismatch(got.bytes.begin(), got.bytes.end(), expected.bytes.begin());
    return where + ": expert " + std::to_string(expert) + " unpacks to different bytes (first at byte " + std::to_string(diff.first - got.bytes.begin()) + ")";
  }
  if (!packs) return std::nullopt;
  auto diff = std::mismatch(packed.begin(), packed.end(), slab.begin());
  return where + ": expert " + std::to_string(expert) + " unpacks to the source's bytes, but its padding differs from what the layout writes (first at packed byte " +
         std::to_string(diff.first - packed.begin()) + ")";
}

}  // namespace

ArtifactCheck check_artifact_integrity(const std::string& artifact_dir) {
  ArtifactCheck out;
  check_artifact_files(artifact_dir, read_artifact_manifest(artifact_dir), out, thread_count(0));
  return out;
}

ArtifactCheck check_artifact(const std::string& artifact_dir, const std::string& source) {
  return check_artifact(artifact_dir, ckpt::open_checkpoint(source));
}

ArtifactCheck check_artifact(const std::string& artifact_dir, const ckpt::Checkpoint& ck) {
  ArtifactCheck out;
  const artifact::Manifest m = read_artifact_manifest(artifact_dir);
  // Every layer, size and tensor entry must be what converting this source gives, before the
  // source's params are compared with the artifact's bytes.
  validate_artifact_against_source(m, manifest_path_of(artifact_dir), ck, ck.path);
  const int threads = thread_count(0);
  check_artifact_files(artifact_dir, m, out, threads);
  for (size_t i = 0; i < m.layers.size(); ++i) check_layer_against_source(artifact_dir, m, i, ck, out, threads);
  return out;
}

void check_artifact_files(const std::string& artifact_dir, const artifact::Manifest& m, ArtifactCheck& out, int threads, const HashedBytes& hashed) {
  ArtifactHashPass pass(artifact_dir, m, hashed);
  pass.finish(out, threads);  // no layer to go ahead of: the whole pass at once
}

void check_layer_against_source(const std::string& artifact_dir, const artifact::Manifest& m, size_t layer_index, const ckpt::Checkpoint& ck,
                                ArtifactCheck& out, int threads, const CheckedBytes& checked) {
  ArtifactFileCache file(artifact_dir);
  {
    const artifact::Layer& layer = m.layers.at(layer_index);
    const ckpt::MoeLayer* source_layer = ck.find_layer(layer.prefix);
    if (!source_layer) {
      out.problems.push_back(layer.prefix + ": no such MoE layer in the source");
      return;
    }
    const int ranks = static_cast<int>(layer.ranks.size());
    std::set<std::string> available;  // the source layer's params, for derived outputs
    for (const auto& p : source_layer->params) available.insert(p.name);
    for (const auto& rank : layer.ranks) {
      for (const auto& [role, t] : rank.tensors) {
        const st::File& f = file(t.file);
        const st::TensorInfo* info = f.find(t.name);
        std::string where = t.file + ": " + t.name + " (rank " + std::to_string(rank.rank) + ")";
        if (!info) continue;  // reported by the integrity check
        auto bytes = f.data(*info);
        struct ReportWhenChecked {  // on every way out of this tensor's check
          const CheckedBytes& checked;
          uint64_t bytes;
          ~ReportWhenChecked() {
            if (checked) checked(bytes);
          }
        } report_when_checked{checked, bytes.size()};
        // Expert parallelism is recorded as ranks that each hold a share of the experts.
        const bool expert_parallel = ranks > 1 && m.target.value("ep", false);
        const uint64_t local = expert_parallel ? layer.num_experts / static_cast<uint64_t>(ranks) : layer.num_experts;
        RankGeometry g;
        g.hidden = source_layer->hidden_size;
        g.intermediate = source_layer->intermediate_size;
        g.padded_hidden = layer.padded_hidden_size;
        g.padded_intermediate = layer.padded_intermediate_size;
        g.tp_size = expert_parallel ? 1 : static_cast<uint64_t>(ranks);
        g.tp_rank = expert_parallel ? 0 : static_cast<uint64_t>(rank.rank);
        g.gpt_oss_interleaved = source_layer->recipe.w13_order == ckpt::W13Order::interleaved;
        g.gated = source_layer->gated;
        set_family_geometry(g, *source_layer, layer.family, params_dtype_of_target(m.target.value("dtype", std::string("bf16")), artifact_dir), holds_fp8_fnuz(layer));
        if (holds_moe_wna16_scales(layer)) set_moe_wna16_geometry(g);
        const uint64_t first = expert_parallel ? local * static_cast<uint64_t>(rank.rank) : 0;
        const SwigluFacts swiglu{layer.swiglu_limit, layer.swiglu_beta};
        if (const LayerReduction* reduction = find_reduction(t.layout)) {
          std::vector<uint8_t> expected(static_cast<size_t>(byte_size(reduction->dtype(), reduction->shape(local))));
          reduction->reduce(reduction_input(ck, *source_layer, role, g, first, local, swiglu), expected);
          ++out.expert_slabs_checked;
          if (!std::equal(bytes.begin(), bytes.end(), expected.begin(), expected.end()))
            out.problems.push_back(where + ": differs from " + reduction->name() + " of the source's experts");
          continue;
        }
        if (local == 0 || bytes.size() % local != 0) {
          out.problems.push_back(where + ": " + std::to_string(bytes.size()) + " bytes do not split into " + std::to_string(local) + " expert slabs");
          continue;
        }
        const uint64_t slab = bytes.size() / local;
        if (auto derivation = make_expert_derivation(role, t.layout, available, *source_layer)) {
          // Computed from several params (act-order sort, vLLM's empty placeholders): recompute.
          std::vector<uint8_t> expected(static_cast<size_t>(slab));
          for (uint64_t e = 0; e < local; ++e) {
            produce_derived_expert(ck, *source_layer, *derivation, g, first + e, expected);
            ++out.expert_slabs_checked;
            if (!std::equal(expected.begin(), expected.end(), bytes.begin() + static_cast<std::ptrdiff_t>(e * slab)))
              out.problems.push_back(where + ": expert " + std::to_string(first + e) + " differs from " + derivation->name() + " of the source");
          }
          continue;
        }
        auto layout = packers::make_layout(t.layout);
        const std::string source_role = source_param_of(*source_layer, role);
        std::function<void(uint64_t, OwnedTensor&)> stage;
        if (!t.value_stage.empty()) {
          const ValueStage* s = find_value_stage(t.value_stage);
          if (!s) {
            out.problems.push_back(where + ": unknown value stage `" + t.value_stage + "`");
            continue;
          }
          stage = s->prepare(reduction_input(ck, *source_layer, source_role, g, first, local, swiglu)).change;
        }
        // Each expert's loaded param is packed again and compared with its slab, in parallel;
        // results are kept per expert and reported in expert order, as one thread would.
        struct SlabResult {
          bool source_has_role = true;
          std::optional<std::string> problem;
        };
        std::vector<SlabResult> results(static_cast<size_t>(local));
        parallel_for_each_index(local, threads, [&](uint64_t e) {
          const uint64_t expert = first + e;
          ckpt::ExpertParams params = ckpt::read_expert_params(ck, *source_layer, expert, source_role);
          auto it = params.tensors.find(source_role);
          if (it == params.tensors.end()) {
            results[e].source_has_role = false;
            return;
          }
          OwnedTensor expected = load_expert_param(source_role, it->second, g);
          if (stage) stage(e, expected);
          results[e].problem = compare_slab(*layout, expected, bytes.subspan(static_cast<size_t>(e * slab), static_cast<size_t>(slab)), where, expert);
        });
        for (const SlabResult& r : results) {
          if (!r.source_has_role) {
            out.problems.push_back(where + ": the source has no " + source_role);
            break;
          }
          ++out.expert_slabs_checked;
          if (r.problem) out.problems.push_back(*r.problem);
        }
      }
    }
  }
}

}  // namespace moepack::runtime
