// Writing a generated checkpoint: shards, index, config files, all into OUT.tmp renamed to OUT.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <unordered_map>

#include "formats/safetensors/writer.h"
#include "lib/core/error.h"
#include "lib/core/file_io.h"
#include "lib/core/tensor.h"
#include "lib/synth/internal.h"

namespace moepack::synth {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// huggingface_hub's default shard cap ("5GB" = 5·10^9 bytes).
constexpr uint64_t kShardCapBytes = 5'000'000'000ull;

uint64_t payload_bytes(const Sink::Tensor& t) { return byte_size(t.dtype, t.shape); }

// Shard index of every tensor, in state-dict order. Small samples split into `count` parts of
// about equal bytes; real-shape checkpoints close a shard when the next tensor would pass the cap.
std::vector<size_t> assign_shards(const std::vector<Sink::Tensor>& tensors, size_t count, bool by_cap) {
  std::vector<size_t> shard(tensors.size(), 0);
  uint64_t total = 0;
  for (const auto& t : tensors) total += payload_bytes(t);
  uint64_t before = 0, in_current = 0;
  size_t current = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    uint64_t b = payload_bytes(tensors[i]);
    if (by_cap) {
      if (in_current > 0 && in_current + b > kShardCapBytes) {
        ++current;
        in_current = 0;
      }
      shard[i] = current;
      in_current += b;
    } else {
      shard[i] = total ? std::min<size_t>(count - 1, static_cast<size_t>(static_cast<unsigned __int128>(before) * count / total)) : 0;
    }
    before += b;
  }
  // Renumber so no shard is empty (a tensor larger than a share can skip one).
  std::vector<size_t> used;
  for (size_t s : shard)
    if (used.empty() || used.back() != s) used.push_back(s);
  for (auto& s : shard) s = static_cast<size_t>(std::lower_bound(used.begin(), used.end(), s) - used.begin());
  return shard;
}

std::string shard_name(size_t index, size_t count, bool zero_based) {
  if (count == 1) return "model.safetensors";
  char buf[64];
  // gpt-oss numbers its shards from 0 and names the last index, not the count.
  if (zero_based) std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", index, count - 1);
  else std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return buf;
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) throw_io(path, "cannot write", errno);
}

// Header plus an all-zero data region of the exact length, made by extending the file: on
// ext4/xfs/tmpfs the region takes no disk blocks.
void write_sparse_file(const std::string& path, const std::vector<st::TensorSpec>& specs) {
  std::vector<uint8_t> header = st::build_header(specs, {{"format", "pt"}}, path);
  uint64_t data = 0;
  for (const auto& s : specs) data += byte_size(s.dtype, s.shape);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_io(path, "cannot create", errno);
  try {
    write_all(fd, header, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::ftruncate(fd, static_cast<off_t>(header.size() + data)) != 0) {
    int e = errno;
    ::close(fd);
    throw_io(path, "cannot extend to the data length", e);
  }
  if (::close(fd) != 0) throw_io(path, "close failed", errno);
}

void write_data_file(const std::string& path, const std::vector<const Sink::Tensor*>& tensors) {
  std::vector<st::TensorSpec> specs;
  std::unordered_map<std::string_view, const Sink::Tensor*> by_name;
  for (const auto* t : tensors) {
    specs.push_back({t->name, t->dtype, t->shape});
    by_name[t->name] = t;
  }
  st::sort_like_reference_writer(specs);
  st::Writer w(path, specs, {{"format", "pt"}});
  for (const auto& s : specs) w.write(by_name.at(s.name)->bytes);
  w.commit();
}

// Removes OUT.tmp unless the rename happened.
struct TempDirGuard {
  std::string path;
  bool keep = false;
  ~TempDirGuard() {
    if (!keep) {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  }
};

const char* kGenerationConfig = R"({
  "bos_token_id": 1,
  "do_sample": true,
  "eos_token_id": 2,
  "temperature": 0.6,
  "top_p": 0.95,
  "transformers_version": "4.56.0"
}
)";

const char* kTokenizerConfig = R"({
  "add_bos_token": false,
  "bos_token": "<s>",
  "eos_token": "</s>",
  "model_max_length": 4096,
  "pad_token": "<pad>",
  "tokenizer_class": "PreTrainedTokenizerFast"
}
)";

}  // namespace

WriteReport write_sample(const std::string& family_name, const std::string& out_dir, const SampleOptions& options) {
  std::string family = family_name;
  if (family.empty() && !options.real_shape.empty())
    for (const auto& m : real_shape_models())
      if (m.name == options.real_shape) family = m.default_family;
  if (family.empty()) throw Error(ErrorKind::usage, "sample: no family given");
  const FamilyDef& fam = find_family(family);
  SampleDims dims = sample_dims(family, options);
  if (out_dir.empty()) throw Error(ErrorKind::usage, "sample: no output directory given");
  std::string out = out_dir;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  std::error_code ec;
  if (fs::exists(out, ec) && !options.force) throw Error(ErrorKind::usage, out + " exists (use --force to replace it)");

  const bool real = !options.real_shape.empty();
  Sink sink(!real);
  ModelBuild model = build_model(fam, dims, options.seed, sink);

  const std::string tmp = out + ".tmp";
  fs::remove_all(tmp, ec);
  if (!fs::create_directories(tmp, ec) || ec) throw_io(tmp, "cannot create directory", ec.value());
  TempDirGuard guard{tmp};

  const auto& tensors = sink.tensors();
  size_t requested = real ? 0 : static_cast<size_t>(options.shards ? options.shards : fam.default_shards);
  std::vector<size_t> shard_of = assign_shards(tensors, std::max<size_t>(requested, 1), real);
  size_t shard_count = shard_of.empty() ? 1 : shard_of.back() + 1;
  // openai's gpt-oss release numbers its shards from 0; exports written by save_pretrained
  // (amd-quark, llm-compressor, the BF16 conversion) use Hugging Face's 1-based names.
  const bool zero_based = fam.scheme == Scheme::gpt_oss_mxfp4;

  WriteReport report;
  report.dir = out;
  report.tensors = tensors.size();
  std::vector<std::vector<const Sink::Tensor*>> per_shard(shard_count);
  std::map<std::string, std::string> weight_map;
  for (size_t i = 0; i < tensors.size(); ++i) {
    per_shard[shard_of[i]].push_back(&tensors[i]);
    weight_map[tensors[i].name] = shard_name(shard_of[i], shard_count, zero_based);
    report.data_bytes += payload_bytes(tensors[i]);
  }
  for (size_t s = 0; s < shard_count; ++s) {
    std::string name = shard_name(s, shard_count, zero_based);
    std::string path = tmp + "/" + name;
    if (real) {
      std::vector<st::TensorSpec> specs;
      for (const auto* t : per_shard[s]) specs.push_back({t->name, t->dtype, t->shape});
      st::sort_like_reference_writer(specs);
      write_sparse_file(path, specs);
    } else {
      write_data_file(path, per_shard[s]);
    }
    report.files.push_back(name);
  }
  if (shard_count > 1) {
    write_text_file(tmp + "/model.safetensors.index.json", st::shard_index_text(weight_map, report.data_bytes));
    report.files.push_back("model.safetensors.index.json");
  }
  std::map<std::string, std::string> texts = model.extra_files;
  texts["config.json"] = json_text(model.config);
  texts["generation_config.json"] = kGenerationConfig;
  texts["tokenizer_config.json"] = kTokenizerConfig;
  for (const auto& [name, text] : texts) {
    write_text_file(tmp + "/" + name, text);
    report.files.push_back(name);
  }
  std::sort(report.files.begin(), report.files.end());

  if (fs::exists(out, ec)) {
    fs::remove_all(out, ec);
    if (ec) throw_io(out, "cannot remove the existing directory", ec.value());
  }
  if (std::rename(tmp.c_str(), out.c_str()) != 0) throw_io(out, "cannot rename " + tmp + " into place", errno);
  guard.keep = true;
  return report;
}

}  // namespace moepack::synth
