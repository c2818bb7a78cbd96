// `inspect --check-values`: one pass over tensor data looking for values that poison a kernel's
// output (NaN, Inf) or encode NaN scales (E8M0 0xFF, E4M3 0x7F/0xFF). Which U8 tensors are MX
// scales is known only from the layer recipes, so the scan runs on an opened Checkpoint.
#include <algorithm>
#include <cstring>
#include <set>
#include <span>
#include <vector>

#include "formats/checkpoints/checkpoint.h"
#include "lib/core/codecs.h"

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
const char* classify_e8m0(const uint8_t* p) { return e8m0_is_nan(*p) ? "E8M0 NaN (0xFF)" : nullptr; }

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

// Every classifier above flags an element exactly when (bits & mask) == pattern, the element read
// little-endian: the all-ones exponent (F32, F64, F16, BF16, E5M2), E4M3's S.1111.111, the FNUZ
// and E8M0 NaN codes. Whether a chunk holds any such element is a loop the compiler vectorizes,
// so the per-element classifier runs only on the (rare) chunks that need it.
struct Candidates {
  int bytes = 0;
  uint64_t mask = 0, pattern = 0;
};
Candidates candidates_for(DType t, bool mx_scale) {
  switch (t) {
    case DType::F32: return {4, 0x7F800000u, 0x7F800000u};
    case DType::F64: return {8, 0x7FF0000000000000ull, 0x7FF0000000000000ull};
    case DType::F16: return {2, 0x7C00, 0x7C00};
    case DType::BF16: return {2, 0x7F80, 0x7F80};
    case DType::F8_E4M3: return {1, 0x7F, 0x7F};
    case DType::F8_E5M2: return {1, 0x7C, 0x7C};
    case DType::F8_E4M3FNUZ:
    case DType::F8_E5M2FNUZ: return {1, 0xFF, 0x80};
    case DType::F8_E8M0: return {1, 0xFF, 0xFF};
    case DType::U8: return mx_scale ? Candidates{1, 0xFF, 0xFF} : Candidates{};
    default: return {};
  }
}

template <typename T>
bool any_candidate_of(std::span<const uint8_t> data, T mask, T pattern) {
  const size_t n = data.size() / sizeof(T);
  unsigned hits = 0;
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, data.data() + i * sizeof(T), sizeof(T));  // little-endian hosts, as the format
    hits |= static_cast<unsigned>((v & mask) == pattern);
  }
  return hits != 0;
}

bool any_candidate(const Candidates& c, std::span<const uint8_t> data) {
  switch (c.bytes) {
    case 1: return any_candidate_of<uint8_t>(data, static_cast<uint8_t>(c.mask), static_cast<uint8_t>(c.pattern));
    case 2: return any_candidate_of<uint16_t>(data, static_cast<uint16_t>(c.mask), static_cast<uint16_t>(c.pattern));
    case 4: return any_candidate_of<uint32_t>(data, static_cast<uint32_t>(c.mask), static_cast<uint32_t>(c.pattern));
    case 8: return any_candidate_of<uint64_t>(data, c.mask, c.pattern);
    default: return true;  // no screen: classify every element
  }
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
      const Candidates screen = candidates_for(t.dtype, mx.count(t.name) > 0);
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
        if (!any_candidate(screen, data)) continue;
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
