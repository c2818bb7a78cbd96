// Writes the seed corpus of every fuzz target under OUT/<target>/ (usage: fuzz_make_seeds OUT):
// the upstream safetensors test vectors and probes, every case of the malformed corpus, index
// documents, config-like JSON, and codec edge values. Seeds are generated, never checked in, so
// they follow the corpus when it grows.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

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

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " OUT_DIR\n";
    return 2;
  }
  SeedWriter w{fs::path(argv[1])};
  for (const auto& [name, bytes] : moepack::test::corpus::valid_files()) {
    w.add("st_header", "valid_" + name, bytes);
    w.add("st_file", "valid_" + name, bytes);
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
  std::cout << "wrote " << w.count() << " seeds under " << argv[1] << "\n";
  return 0;
}
