// Builders of small checkpoints for the checkpoint and CLI tests: tensors with known bytes
// written through st::Writer, config JSON text, and header-faithful sparse checkpoints (header
// written, data region left as a hole with ftruncate) of real model sizes. Header-only so
// tests/cli can use it too.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/safetensors/writer.h"
#include "lib/core/tensor.h"
#include "support/test_support.h"

namespace moepack::test {

// A recognisable byte pattern: a different sequence per seed, so a misplaced byte shows.
inline std::vector<uint8_t> pattern_bytes(uint64_t count, uint32_t seed) {
  std::vector<uint8_t> b(count);
  uint32_t x = seed * 2654435761u + 1;
  for (uint64_t i = 0; i < count; ++i) {
    x = x * 1103515245u + 12345u;
    b[i] = static_cast<uint8_t>(x >> 16);
  }
  return b;
}

inline std::vector<uint8_t> f32_bytes(std::initializer_list<float> values) {
  std::vector<uint8_t> out(values.size() * 4);
  size_t i = 0;
  for (float v : values) std::memcpy(&out[4 * i++], &v, 4);
  return out;
}

inline std::vector<uint8_t> i32_bytes(const std::vector<int32_t>& values) {
  std::vector<uint8_t> out(values.size() * 4);
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

struct FixtureTensor {
  std::string name;
  DType dtype;
  std::vector<uint64_t> shape;
  std::vector<uint8_t> bytes;  // empty: filled by write() with `pattern_bytes` seeded by the name
};

class CheckpointBuilder {
 public:
  explicit CheckpointBuilder(std::string dir) : dir_(std::move(dir)) { std::filesystem::create_directories(dir_); }

  CheckpointBuilder& add(std::string name, DType dtype, std::vector<uint64_t> shape, std::vector<uint8_t> bytes = {}) {
    tensors_.push_back({std::move(name), dtype, std::move(shape), std::move(bytes)});
    return *this;
  }
  CheckpointBuilder& config(const nlohmann::json& j) {
    write_text(dir_ + "/config.json", j.dump(2));
    return *this;
  }
  CheckpointBuilder& side_file(const std::string& name, const nlohmann::json& j) {
    write_text(dir_ + "/" + name, j.dump(2));
    return *this;
  }
  std::vector<FixtureTensor>& tensors() { return tensors_; }
  const std::string& dir() const { return dir_; }

  // One file with real bytes (a per-tensor pattern unless given).
  std::string write(const std::string& file = "model.safetensors") {
    std::vector<st::TensorSpec> specs;
    std::map<std::string, FixtureTensor*> by_name;
    for (auto& t : tensors_) {
      specs.push_back({t.name, t.dtype, t.shape});
      by_name[t.name] = &t;
    }
    st::sort_like_reference_writer(specs);
    std::string path = dir_ + "/" + file;
    st::Writer w(path, specs, {{"format", "pt"}});
    for (const auto& s : specs) {
      FixtureTensor& t = *by_name[s.name];
      uint64_t n = byte_size(t.dtype, t.shape);
      if (!t.bytes.empty() && t.bytes.size() != n) throw std::runtime_error("fixture " + t.name + ": byte count does not match shape");
      // Kept in the fixture, so tests can compare what was written with what is read back.
      if (t.bytes.empty()) t.bytes = pattern_bytes(n, static_cast<uint32_t>(std::hash<std::string>{}(t.name)));
      if (n) w.write(t.bytes);
    }
    w.commit();
    return path;
  }

  // Header-faithful files whose data region is a hole: `shard_of` picks a shard per tensor
  // (0-based); with more than one shard an index with HF's 1-based names is written.
  void write_sparse(size_t shards, const std::function<size_t(const std::string&)>& shard_of) {
    std::vector<std::vector<st::TensorSpec>> per(shards);
    for (const auto& t : tensors_) per[shards == 1 ? 0 : shard_of(t.name)].push_back({t.name, t.dtype, t.shape});
    nlohmann::json weight_map = nlohmann::json::object();
    uint64_t total = 0;
    for (size_t s = 0; s < shards; ++s) {
      char name[64];
      std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, shards);
      std::string file = shards == 1 ? "model.safetensors" : name;
      st::sort_like_reference_writer(per[s]);
      auto header = st::build_header(per[s], {{"format", "pt"}}, file);
      uint64_t data = 0;
      for (const auto& t : per[s]) {
        data += byte_size(t.dtype, t.shape);
        weight_map[t.name] = file;
      }
      total += data;
      std::string path = dir_ + "/" + file;
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0) throw std::runtime_error("cannot create " + path);
      bool ok = ::write(fd, header.data(), header.size()) == static_cast<ssize_t>(header.size()) &&
                ::ftruncate(fd, static_cast<off_t>(header.size() + data)) == 0;
      ::close(fd);
      if (!ok) throw std::runtime_error("cannot write sparse " + path);
    }
    if (shards > 1) side_file("model.safetensors.index.json", {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}});
  }

 private:
  std::string dir_;
  std::vector<FixtureTensor> tensors_;
};

// Per-expert tensors of one MoE layer: for each expert and projection, every (suffix, dtype,
// shape-from-(out,in)) entry. Projections in gate, up, down order.
struct ExpertTensorSpec {
  std::string suffix;
  DType dtype;
  std::function<std::vector<uint64_t>(uint64_t out, uint64_t in)> shape;
};

inline void add_per_expert_layer(CheckpointBuilder& b, const std::string& prefix, uint64_t experts, uint64_t hidden, uint64_t inter,
                                 const std::vector<ExpertTensorSpec>& specs, const char* gate = "gate_proj", const char* up = "up_proj", const char* down = "down_proj") {
  struct P {
    const char* name;
    uint64_t out, in;
  };
  const P projs[3] = {{gate, inter, hidden}, {up, inter, hidden}, {down, hidden, inter}};
  for (uint64_t e = 0; e < experts; ++e)
    for (const auto& p : projs)
      for (const auto& s : specs) b.add(prefix + "." + std::to_string(e) + "." + p.name + "." + s.suffix, s.dtype, s.shape(p.out, p.in));
}

// Shape helpers for the specs above.
inline std::vector<uint64_t> scalar_shape(uint64_t, uint64_t) { return {}; }
inline std::vector<uint64_t> one_shape(uint64_t, uint64_t) { return {1}; }

// A config.json for a small MoE model.
inline nlohmann::json moe_config(const std::string& model_type, uint64_t hidden, uint64_t inter, uint64_t experts, uint64_t layers = 2) {
  nlohmann::json j = {{"model_type", model_type}, {"hidden_size", hidden}, {"num_hidden_layers", layers}, {"num_experts_per_tok", 2}, {"torch_dtype", "bfloat16"}, {"hidden_act", "silu"}};
  if (model_type == "mixtral" || model_type == "gpt_oss") {
    j["intermediate_size"] = inter;
    j["num_local_experts"] = experts;
  } else if (model_type == "deepseek_v3" || model_type == "deepseek_v4") {
    j["moe_intermediate_size"] = inter;
    j["intermediate_size"] = inter * 9;
    j["n_routed_experts"] = experts;
  } else {
    j["moe_intermediate_size"] = inter;
    j["num_experts"] = experts;
    j["norm_topk_prob"] = true;
  }
  return j;
}

}  // namespace moepack::test
