// Checkpoint family detection and expert reading on a stranger's checkpoint directory:
// ckpt::open_checkpoint on a directory whose config.json, quantization side file and
// safetensors header come from the input, then read_expert_params of expert 0 of every MoE
// layer it found. Beyond "no crash": only moepack::Error of kind 4/6 escapes (a family file
// reading a config key of the wrong type through nlohmann would throw type_error), a refusal
// names a file of the checkpoint, and every canonical param read has exactly the bytes its
// dtype and shape say (the converter sizes packed slabs from them).
//
// Input: CONFIG \0 SIDE \0 HEADER
//   CONFIG  config.json (left out when empty)
//   SIDE    first byte picks the legacy quantization side file ('h' hf_quant_config.json,
//           'q' quantize_config.json, 'c' quant_config.json; anything else: none), the rest is it
//   HEADER  the JSON header of model.safetensors (may hold more NULs). The data region is sized
//           to the largest end offset it declares (capped), so headers that describe their
//           tensors correctly open; its bytes are a fixed pattern.
// make_seeds.cpp writes one seed per sample checkpoint in this format (up to ~8 kB each, hence
// the larger fuzz-max-len).
// fuzz-links: moepack_checkpoints
// fuzz-max-len: 16384
#include <algorithm>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "formats/checkpoints/checkpoint.h"
#include "fuzz/fuzz_scratch.h"
#include "fuzz/fuzz_target.h"

namespace {

constexpr uint64_t kMaxDataBytes = 1u << 20;

struct Parts {
  std::string config, side, header;
};

Parts split(const uint8_t* data, size_t size) {
  const char* p = reinterpret_cast<const char*>(data);
  const char* end = p + size;
  const char* nul1 = std::find(p, end, '\0');
  const char* nul2 = nul1 == end ? end : std::find(nul1 + 1, end, '\0');
  Parts parts;
  parts.config.assign(p, nul1);
  if (nul1 != end) parts.side.assign(nul1 + 1, nul2);
  if (nul2 != end) parts.header.assign(nul2 + 1, end);
  return parts;
}

// The data region the header asks for: the largest data_offsets end (a lenient parse; the real
// reader decides whether the header is valid).
uint64_t declared_data_bytes(const std::string& header) {
  const nlohmann::json j = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
  uint64_t end = 0;
  if (!j.is_object()) return 0;
  for (const auto& [name, info] : j.items()) {
    if (!info.is_object()) continue;
    auto offsets = info.find("data_offsets");
    if (offsets == info.end() || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[1].is_number_unsigned()) continue;
    end = std::max(end, (*offsets)[1].get<uint64_t>());
  }
  return std::min(end, kMaxDataBytes);
}

std::vector<uint8_t> shard_bytes(const std::string& header) {
  std::vector<uint8_t> out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  const uint64_t data = declared_data_bytes(header);
  // Varied bytes (scales, codes) rather than zeros, the same for every run of an input.
  for (uint64_t i = 0; i < data; ++i) out.push_back(static_cast<uint8_t>(i * 131 + 7));
  return out;
}

const moepack::fuzz::ScratchDir& checkpoint_dir() {
  static moepack::fuzz::ScratchDir dir;
  return dir;
}

}  // namespace

MOEPACK_FUZZ_TARGET(ckpt_detect) {
  using namespace moepack;
  const fuzz::ScratchDir& dir = checkpoint_dir();
  const Parts parts = split(data, size);
  const char* side_files[] = {"hf_quant_config.json", "quantize_config.json", "quant_config.json"};
  for (const char* name : {"config.json", side_files[0], side_files[1], side_files[2]}) std::filesystem::remove(dir.file(name));
  auto bytes_of = [](const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); };
  if (!parts.config.empty()) dir.write("config.json", bytes_of(parts.config));
  if (!parts.side.empty()) {
    const char* name = parts.side[0] == 'h' ? side_files[0] : parts.side[0] == 'q' ? side_files[1] : parts.side[0] == 'c' ? side_files[2] : nullptr;
    if (name) dir.write(name, bytes_of(parts.side.substr(1)));
  }
  dir.write("model.safetensors", shard_bytes(parts.header));

  std::string error;
  ckpt::Checkpoint checkpoint;
  if (!fuzz::expect_input_error([&] { checkpoint = ckpt::open_checkpoint(dir.path()); }, &error)) {
    MOEPACK_FUZZ_CHECK(error.find(dir.path()) != std::string::npos, "message does not name a file of the checkpoint: " + error);
    return;
  }
  for (const ckpt::MoeLayer& layer : checkpoint.layers) {
    if (layer.num_experts == 0) continue;
    ckpt::ExpertParams params;
    if (!fuzz::expect_input_error([&] { params = ckpt::read_expert_params(checkpoint, layer, 0); }, &error)) {
      MOEPACK_FUZZ_CHECK(error.find(dir.path()) != std::string::npos, "message does not name a file of the checkpoint: " + error);
      continue;
    }
    for (const auto& entry : params.tensors) {
      const std::string& name = entry.first;
      const OwnedTensor& tensor = entry.second;
      uint64_t expected = 0;
      const bool sized = fuzz::expect_input_error([&] { expected = byte_size(tensor.dtype, tensor.shape); });
      MOEPACK_FUZZ_CHECK(sized && tensor.bytes.size() == expected,
                         layer.prefix + " expert 0 `" + name + "`: " + std::to_string(tensor.bytes.size()) + " bytes for " +
                             std::string(dtype_name(tensor.dtype)) + shape_string(tensor.shape));
    }
  }
}
