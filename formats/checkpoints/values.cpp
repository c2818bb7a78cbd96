// `inspect --check-values`: one pass over tensor data looking for values that poison a kernel's
// output (NaN, Inf) or encode NaN scales (E8M0 0xFF, E4M3 0x7F/0xFF). Which U8 tensors are MX
// scales is known only from the layer recipes, so the scan runs on an opened Checkpoint.
#include <algorithm>
#include <cstring>
#include <set>
#include <vector>

#include "formats/checkpoints/checkpoint.h"

namespace moepack::ckpt {
namespace {

// Classifies one element; returns nullptr for an ordinary value.
using Classifier = const char* (*)(const uint8_t* p);

const char* classify_f32(const uint8_t* p) {
  uint32_t b;
  std::memcpy(&b, p, 4);
  if ((b & 0x7F800000u) != 0x7F800000u) return nullptr;
  if (b & 0x007FFFFFu) return "NaN";
  return (b >> 31) ? "-Inf" : "+Inf";
}
const char* classify_f64(const uint8_t* p) {
  uint64_t b;
  std::memcpy(&b, p, 8);
  if ((b & 0x7FF0000000000000ull) != 0x7FF0000000000000ull) return nullptr;
  if (b & 0x000FFFFFFFFFFFFFull) return "NaN";
  return (b >> 63) ? "-Inf" : "+Inf";
}
const char* classify_f16(const uint8_t* p) {
  uint16_t b = static_cast<uint16_t>(p[0] | (p[1] << 8));
  if ((b & 0x7C00) != 0x7C00) return nullptr;
  if (b & 0x03FF) return "NaN";
  return (b >> 15) ? "-Inf" : "+Inf";
}
const char* classify_bf16(const uint8_t* p) {
  uint16_t b = static_cast<uint16_t>(p[0] | (p[1] << 8));
  if ((b & 0x7F80) != 0x7F80) return nullptr;
  if (b & 0x007F) return "NaN";
  return (b >> 15) ? "-Inf" : "+Inf";
}
const char* classify_e4m3(const uint8_t* p) { return (*p & 0x7F) == 0x7F ? "NaN" : nullptr; }
const char* classify_e5m2(const uint8_t* p) {
  if ((*p & 0x7C) != 0x7C) return nullptr;
  if (*p & 0x03) return "NaN";
  return (*p & 0x80) ? "-Inf" : "+Inf";
}
const char* classify_fnuz(const uint8_t* p) { return *p == 0x80 ? "NaN" : nullptr; }
const char* classify_e8m0(const uint8_t* p) { return *p == 0xFF ? "E8M0 NaN (0xFF)" : nullptr; }

Classifier classifier_for(DType t, bool mx_scale) {
  switch (t) {
    case DType::F32: return classify_f32;
    case DType::F64: return classify_f64;
    case DType::F16: return classify_f16;
    case DType::BF16: return classify_bf16;
    case DType::F8_E4M3: return classify_e4m3;
    case DType::F8_E5M2: return classify_e5m2;
    case DType::F8_E4M3FNUZ:
    case DType::F8_E5M2FNUZ: return classify_fnuz;
    case DType::F8_E8M0: return classify_e8m0;
    case DType::U8: return mx_scale ? classify_e8m0 : nullptr;
    default: return nullptr;
  }
}

// U8 tensors holding E8M0 scales: the scale params of MX-quantized expert layers.
std::set<std::string> mx_scale_tensors(const Checkpoint& ckpt) {
  std::set<std::string> out;
  for (const auto& layer : ckpt.layers) {
    if (layer.quant.method.weight_key.rfind("kMxfp", 0) != 0) continue;
    for (const auto& name : layer.tensors) {
      bool scale = name.size() >= 7 && (name.compare(name.size() - 7, 7, "_scales") == 0 || name.find(".weight_scale") != std::string::npos ||
                                        name.compare(name.size() - 6, 6, ".scale") == 0);
      if (scale) out.insert(name);
    }
  }
  return out;
}

}  // namespace

constexpr uint64_t kScanChunkBytes = uint64_t{1} << 20;

ValueScan scan_values(const Checkpoint& ckpt, size_t max_listed) {
  ValueScan scan;
  const auto mx = mx_scale_tensors(ckpt);
  std::vector<uint8_t> chunk;
  for (const auto& file : ckpt.shards->files()) {
    for (const auto& t : file->header().tensors) {
      auto ref = ckpt.shards->find(t.name);
      if (!ref || ref->file != file.get()) continue;  // a copy the index does not point to
      Classifier classify = classifier_for(t.dtype, mx.count(t.name) > 0);
      if (!classify) continue;
      const uint64_t bytes_per_element = static_cast<uint64_t>(dtype_bits(t.dtype) / 8);
      const uint64_t total = t.num_bytes();
      ++scan.tensors_scanned;
      scan.bytes_scanned += total;
      // Chunked checked reads (a whole number of elements each): bounded memory, and a shard
      // truncated under us is an I/O error naming it rather than SIGBUS through the mapping.
      const uint64_t chunk_bytes = (kScanChunkBytes / bytes_per_element) * bytes_per_element;
      chunk.resize(static_cast<size_t>(std::min(chunk_bytes, total)));
      uint64_t bad = 0;
      for (uint64_t at = 0; at < total; at += chunk_bytes) {
        const uint64_t len = std::min(chunk_bytes, total - at);
        std::span<uint8_t> data(chunk.data(), static_cast<size_t>(len));
        file->read(t, at, data);
        for (uint64_t k = 0; k < len; k += bytes_per_element) {
          const char* what = classify(data.data() + k);
          if (!what) continue;
          ++bad;
          if (scan.listed.size() < max_listed) scan.listed.push_back({t.name, file->path(), (at + k) / bytes_per_element, what});
        }
      }
      if (bad) {
        scan.per_tensor[t.name] += bad;
        scan.bad_values += bad;
      }
    }
  }
  return scan;
}

}  // namespace moepack::ckpt
