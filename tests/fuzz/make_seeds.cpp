// Writes the seed corpus of every fuzz target under OUT/<target>/ (usage: fuzz_make_seeds OUT):
// the upstream safetensors test vectors and probes, every case of the malformed corpus, index
// documents, config-like JSON, codec edge values, every sample checkpoint (samples/, reduced to
// one MoE layer, for ckpt_detect), layout descriptions for packer_unpack, and the manifests of
// artifacts converted from samples/gpt-oss-mxfp4 by the moepack binary of this build (for
// manifest). Seeds are generated, never checked in, so they follow the corpus and the samples
// when they change.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <zstd.h>

#include "formats/artifact/golden.h"
#include "packers/registry.h"
#include "safetensors/malformed_corpus.h"

namespace fs = std::filesystem;
using moepack::test::corpus::CorpusCase;

namespace {

// Larger inputs make every mutation slower; the deep-nesting and 100k-tensor cases are covered
// by the in-process corpus test instead.
constexpr size_t kMaxSeedBytes = 64 * 1024;

class SeedWriter {
 public:
  explicit SeedWriter(fs::path root) : root_(std::move(root)) {}
  void add(const std::string& target, const std::string& name, const std::vector<uint8_t>& bytes) {
    if (bytes.size() > kMaxSeedBytes) return;
    fs::create_directories(root_ / target);
    std::ofstream out(root_ / target / name, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("cannot write seed " + (root_ / target / name).string());
    ++count_;
  }
  void add(const std::string& target, const std::string& name, const std::string& text) { add(target, name, std::vector<uint8_t>(text.begin(), text.end())); }
  size_t count() const { return count_; }

 private:
  fs::path root_;
  size_t count_ = 0;
};

std::string header_text(const std::vector<uint8_t>& file) {
  if (file.size() < 8) return "";
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file[static_cast<size_t>(i)];
  if (n > file.size() - 8) return "";
  return std::string(file.begin() + 8, file.begin() + 8 + static_cast<long>(n));
}

void codec_seeds(SeedWriter& w) {
  std::vector<uint8_t> all_bytes(256);
  for (int i = 0; i < 256; ++i) all_bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
  w.add("codecs", "all_codes", all_bytes);
  // Floats at the rounding edges: E4M3 saturation and NaN boundary, subnormal midpoints, E2M1
  // ties, F16/BF16 overflow midpoints, zeros, infinities, NaNs.
  const std::vector<float> edges = {0.0f, -0.0f, 448.0f, 464.0f, std::nextafter(464.0f, 1e9f), 480.0f, -464.0f, 0.25f, 0.75f,
                                    1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 7.0f, 0x1p-10f, 0x1p-9f, 0x3p-10f, 0x1p-7f, 65504.0f,
                                    65519.0f, 65520.0f, 0x1p-24f, 0x1p-25f, 0x3p-25f, 3.3961776e38f, 1e-45f,
                                    std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                                    std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::max()};
  std::vector<uint8_t> floats(edges.size() * 4);
  std::memcpy(floats.data(), edges.data(), floats.size());
  w.add("codecs", "edge_floats", floats);
}

void writer_seeds(SeedWriter& w) {
  // FuzzedDataProvider reads structure from the input; varied pseudo-random bytes give the
  // fuzzer a spread of tensor counts, dtypes and ranks to start from.
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (int seed = 0; seed < 32; ++seed) {
    std::vector<uint8_t> bytes(64 + 8 * static_cast<size_t>(seed));
    for (uint8_t& b : bytes) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      b = static_cast<uint8_t>(state);
    }
    w.add("st_writer_roundtrip", "random_" + std::to_string(seed), bytes);
  }
}

std::vector<uint8_t> file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The layer number after "layers." in a tensor name, or -1.
long layer_of(const std::string& name) {
  size_t at = name.find("layers.");
  if (at == std::string::npos) return -1;
  return std::strtol(name.c_str() + at + 7, nullptr, 10);
}

// One sample checkpoint as a ckpt_detect input (the format is described in fuzz_ckpt_detect.cpp):
// config.json, NUL, side-file selector + side file, NUL, one safetensors header. The header
// keeps only the first MoE layer's expert and router tensors of every shard, with data offsets
// renumbered contiguously, so a seed stays within the fuzzer's -max_len while still opening as
// the sample's family.
std::string ckpt_detect_seed(const fs::path& sample) {
  std::string config;
  if (fs::exists(sample / "config.json")) {
    auto b = file_bytes(sample / "config.json");
    config = nlohmann::json::parse(b.begin(), b.end()).dump();  // compact: the seed budget is small
  }
  std::string side;
  for (const auto& [selector, name] : {std::pair{'h', "hf_quant_config.json"}, {'q', "quantize_config.json"}, {'c', "quant_config.json"}})
    if (fs::exists(sample / name)) {
      auto b = file_bytes(sample / name);
      side = std::string(1, selector) + nlohmann::json::parse(b.begin(), b.end()).dump();
      break;
    }
  std::vector<std::pair<std::string, nlohmann::json>> tensors;
  std::vector<fs::path> shards;
  for (const auto& e : fs::directory_iterator(sample))
    if (e.path().extension() == ".safetensors") shards.push_back(e.path());
  std::sort(shards.begin(), shards.end());
  for (const auto& shard : shards) {
    const nlohmann::json header = nlohmann::json::parse(header_text(file_bytes(shard)));  // named: items() of a temporary dangles
    for (const auto& [name, info] : header.items())
      if (name != "__metadata__") tensors.emplace_back(name, info);
  }
  long moe_layer = -1;
  for (const auto& [name, info] : tensors)
    if (name.find("experts") != std::string::npos && layer_of(name) >= 0 && (moe_layer < 0 || layer_of(name) < moe_layer)) moe_layer = layer_of(name);
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  uint64_t offset = 0;
  for (auto& [name, info] : tensors) {
    if (layer_of(name) != moe_layer || (name.find("experts") == std::string::npos && name.find("gate.") == std::string::npos)) continue;
    const uint64_t bytes = info["data_offsets"][1].get<uint64_t>() - info["data_offsets"][0].get<uint64_t>();
    header[name] = {{"dtype", info["dtype"]}, {"shape", info["shape"]}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  return config + std::string(1, '\0') + side + std::string(1, '\0') + header.dump();
}

void ckpt_detect_seeds(SeedWriter& w) {
  const fs::path samples = fs::path(MOEPACK_SOURCE_DIR) / "samples";
  for (const auto& e : fs::directory_iterator(samples))
    if (e.is_directory()) w.add("ckpt_detect", e.path().filename().string(), ckpt_detect_seed(e.path()));
  // No config.json at all, and a shard with no tensors: both open paths that end early.
  w.add("ckpt_detect", "no_config_no_tensors", std::string("\0\0{}", 4));
}

// packer_unpack reads: layout index, dtype index, rank-1, dims (two bytes each for a range up to
// 512), an expert count, then payload. One seed per layout with the shape its tests use most
// (a 2-D [64, 32] U8 tensor: FP4 pairs or E8M0 scales), then a 1-D BF16 bias for every layout.
void packer_seeds(SeedWriter& w, size_t layout_count) {
  for (size_t i = 0; i < layout_count; ++i) {
    for (const auto& [dtype_index, rank, dims, tag] : {std::tuple{0, 2, std::vector<int>{64, 32}, "u8_64x32"},
                                                       std::tuple{2, 1, std::vector<int>{128}, "bf16_128"},
                                                       std::tuple{0, 2, std::vector<int>{256, 8}, "u8_256x8"}}) {
      std::vector<uint8_t> bytes = {static_cast<uint8_t>(i), static_cast<uint8_t>(dtype_index), static_cast<uint8_t>(rank - 1)};
      for (int d : dims) {
        bytes.push_back(static_cast<uint8_t>(d >> 8));
        bytes.push_back(static_cast<uint8_t>(d));
      }
      bytes.push_back(2);  // experts - 1 (parameter_shape with 3 experts)
      for (int k = 0; k < 256; ++k) bytes.push_back(static_cast<uint8_t>(k * 73 + static_cast<int>(i)));
      w.add("packer_unpack", "layout" + std::to_string(i) + "_" + tag, bytes);
    }
  }
}

// Manifests of real artifacts: the sample gpt-oss checkpoint converted for a few deployments by
// this build's moepack, written compact so the fuzzer's length budget holds most of them.
void manifest_seeds(SeedWriter& w, const fs::path& scratch) {
  const std::string sample = std::string(MOEPACK_SOURCE_DIR) + "/samples/gpt-oss-mxfp4";
  const std::vector<std::pair<std::string, std::string>> deployments = {
      {"sm90", "--target sm90"}, {"sm100", "--target sm100"}, {"sm90_tp2", "--target sm90 --tp 2"}, {"cpu_amx", "--target cpu-amx"}};
  for (const auto& [tag, flags] : deployments) {
    const fs::path out = scratch / ("artifact_" + tag);
    fs::remove_all(out);
    const std::string command = std::string(MOEPACK_BINARY) + " convert '" + sample + "' " + flags + " -o '" + out.string() + "' --quiet > /dev/null 2>&1";
    if (std::system(command.c_str()) != 0) {
      std::cerr << "fuzz_make_seeds: `" << command << "` failed; no manifest seed for " << tag << "\n";
      continue;
    }
    const auto bytes = file_bytes(out / "moepack.json");
    w.add("manifest", tag + "_pretty", bytes);
    w.add("manifest", tag + "_compact", nlohmann::json::parse(bytes.begin(), bytes.end()).dump());
    fs::remove_all(out);
  }
}

// inspect_json gets every file st_file gets (in main); these add the inputs whose messages quote
// bytes that are not UTF-8, and a valid file whose value scan fails (NaN), so the seeds reach
// all three documents: inspect, inspect with an error, and the error alone.
void inspect_json_seeds(SeedWriter& w) {
  const std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  auto file = [](const std::string& header_text, const std::vector<uint8_t>& data) {
    std::vector<uint8_t> bytes;
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(static_cast<uint64_t>(header_text.size()) >> (8 * i)));
    bytes.insert(bytes.end(), header_text.begin(), header_text.end());
    bytes.insert(bytes.end(), data.begin(), data.end());
    return bytes;
  };
  const std::vector<uint8_t> zeros(4, 0);
  w.add("inspect_json", "latin1_nbsp_padding", file(header + "\xa0", zeros));
  w.add("inspect_json", "u2028_padding", file(header + "\xe2\x80\xa8", zeros));
  w.add("inspect_json", "truncated_multibyte_padding", file(header + "\xe2\x80", zeros));
  w.add("inspect_json", "multibyte_where_a_value_starts", file("{\"a\":\xc3\xa9}", {}));
  w.add("inspect_json", "tensor_name_not_utf8", file("{\"w\xff\":" + header.substr(5), zeros));
  w.add("inspect_json", "nan_value", file(header, {0x00, 0x00, 0xC0, 0x7F}));
}

}  // namespace

// Golden files: a real one as the file's bytes (first byte odd), and its content for the
// target to wrap in a fresh frame (first byte even), plus a content with an output of each dtype.
void golden_seeds(SeedWriter& w) {
  using namespace moepack::artifact;
  Golden g;
  g.moepack_version = "0.1.0";
  g.reference = "vllm e9d1398d9 (2026-08-22); triton_kernels v3.5.1; flashinfer 0.6.17";
  g.artifact = "00112233445566778899aabbccddeeff";
  g.seed = 1234;
  g.tokens = 4;
  g.tensor_hashes = {{"model.layers.0.mlp.experts.w13_weight", "ffeeddccbbaa99887766554433221100"}};
  g.outputs = {{"model.layers.0.mlp.experts.output", moepack::DType::F32, {4, 2}, std::vector<uint8_t>(32, 0x3F)},
               {"input", moepack::DType::BF16, {4, 2}, std::vector<uint8_t>(16, 0x40)}};
  const std::vector<uint8_t> file = encode_golden(g);
  std::vector<uint8_t> raw = {1};
  raw.insert(raw.end(), file.begin(), file.end());
  w.add("golden", "sample_file", raw);
  std::vector<uint8_t> content(static_cast<size_t>(ZSTD_getFrameContentSize(file.data(), file.size())));
  ZSTD_decompress(content.data(), content.size(), file.data(), file.size());
  content.insert(content.begin(), uint8_t{0});
  w.add("golden", "sample_content", content);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " OUT_DIR\n";
    return 2;
  }
  SeedWriter w{fs::path(argv[1])};
  for (const auto& [name, bytes] : moepack::test::corpus::valid_files()) {
    w.add("st_header", "valid_" + name, bytes);
    w.add("st_file", "valid_" + name, bytes);
    w.add("inspect_json", "valid_" + name, bytes);
    w.add("strict_json", "header_" + name, header_text(bytes));
  }
  for (const CorpusCase& c : moepack::test::corpus::malformed_corpus()) {
    for (const auto& [rel, bytes] : c.files) {
      std::string seed_name = c.name + "__" + fs::path(rel).filename().string();
      if (rel == "model.safetensors.index.json") {
        w.add("st_index", seed_name, bytes);
        w.add("strict_json", seed_name, bytes);
      } else if (c.files.size() == 1) {
        w.add("st_header", seed_name, bytes);
        w.add("st_file", seed_name, bytes);
        w.add("inspect_json", seed_name, bytes);
      }
    }
  }
  for (size_t i = 0; i < moepack::test::corpus::valid_index_texts().size(); ++i) {
    const std::string text = moepack::test::corpus::valid_index_texts()[i];
    w.add("st_index", "valid_index_" + std::to_string(i), text);
    w.add("strict_json", "valid_index_" + std::to_string(i), text);
  }
  w.add("strict_json", "config_like",
        R"({"architectures":["GptOssForCausalLM"],"hidden_size":2880,"num_local_experts":32,"rope_scaling":{"factor":32.0,"type":"yarn"},)"
        R"("quantization_config":{"quant_method":"mxfp4","modules_to_not_convert":["model.layers.*.self_attn"]},"tie_word_embeddings":false,"x":null,"y":-1.5e-3})");
  codec_seeds(w);
  writer_seeds(w);
  ckpt_detect_seeds(w);
  packer_seeds(w, moepack::packers::layout_table().size());
  manifest_seeds(w, fs::path(argv[1]) / ".scratch");
  golden_seeds(w);
  inspect_json_seeds(w);
  fs::remove_all(fs::path(argv[1]) / ".scratch");
  std::cout << "wrote " << w.count() << " seeds under " << argv[1] << "\n";
  return 0;
}
