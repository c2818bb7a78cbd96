// The writer's promise, "never write what the reader rejects, and the reader sees what was
// written", on fuzz-derived tensor lists. The target predicts from the specs alone (its own
// arithmetic and UTF-8 check, not the library's) whether build_header must succeed; when it
// must, the header parses back to the same names, dtypes, shapes and metadata in the written
// order, and small ones go through the streaming st::Writer to a file read back by st::File.
// fuzz-links: moepack_safetensors
#include <algorithm>
#include <set>

#include "formats/safetensors/file.h"
#include "formats/safetensors/header.h"
#include "formats/safetensors/writer.h"
#include "fuzz/byte_reader.h"
#include "fuzz/fuzz_scratch.h"
#include "fuzz/fuzz_target.h"

namespace {

using namespace moepack;

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<uint8_t>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < len; ++k) {
      auto cc = static_cast<uint8_t>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr uint32_t kMinForLength[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

uint64_t pick_dim(fuzz::ByteReader& in) {
  switch (in.in_range(0, 7)) {
    case 0: return 0;
    case 1: return in.u64();                // anything, overflow included
    case 2: return uint64_t{1} << in.in_range(0, 63);
    default: return in.in_range(1, 9);
  }
}

enum class Verdict { must_succeed, must_fail, either };

}  // namespace

MOEPACK_FUZZ_TARGET(st_writer_roundtrip) {
  fuzz::ByteReader in(data, size);
  std::vector<st::TensorSpec> specs(in.in_range(0, 10));
  std::map<std::string, std::string> metadata;
  for (size_t i = in.in_range(0, 3); i > 0; --i) {
    std::string key = in.string(16);
    metadata[key] = in.string(16);
  }
  Verdict verdict = Verdict::must_succeed;
  auto fail_if = [&](bool cond) { if (cond) verdict = Verdict::must_fail; };
  for (const auto& [k, v] : metadata) fail_if(!valid_utf8(k) || !valid_utf8(v));
  std::set<std::string> names;
  unsigned __int128 total = 0;
  for (st::TensorSpec& t : specs) {
    t.name = in.string(24);
    t.dtype = static_cast<DType>(in.in_range(0, kDTypeCount - 1));
    size_t rank = in.boolean() ? in.in_range(0, 4) : in.in_range(0, 70);
    for (size_t d = 0; d < rank; ++d) t.shape.push_back(pick_dim(in));
    fail_if(!names.insert(t.name).second || t.name == "__metadata__" || !valid_utf8(t.name) || rank > st::kMaxRank);
    // Bits in 128-bit arithmetic, saturated: the reader counts elements and bits in 64 bits.
    unsigned __int128 elements = 1;
    bool overflow = false;
    for (uint64_t d : t.shape) {
      elements *= d;
      if (elements > ~uint64_t{0}) { overflow = true; elements = 0; break; }
    }
    unsigned __int128 bits = elements * static_cast<unsigned>(dtype_bits(t.dtype));
    fail_if(overflow || bits > ~uint64_t{0} || bits % 8 != 0);
    total += bits / 8;
  }
  // Near 2^64 the file size (header + data) itself wraps: either outcome is acceptable there.
  if (verdict == Verdict::must_succeed && total > (static_cast<unsigned __int128>(1) << 63)) verdict = Verdict::either;
  if (total > ~uint64_t{0}) verdict = Verdict::must_fail;

  std::vector<uint8_t> header;
  try {
    header = st::build_header(specs, metadata, "fuzz.safetensors");
  } catch (const Error& e) {
    MOEPACK_FUZZ_CHECK(verdict != Verdict::must_succeed, std::string("valid specs refused: ") + e.what());
    MOEPACK_FUZZ_CHECK(e.kind() == ErrorKind::internal || e.kind() == ErrorKind::bad_input, e.what());
    return;
  }
  MOEPACK_FUZZ_CHECK(verdict != Verdict::must_fail, "invalid specs were written");
  MOEPACK_FUZZ_CHECK(header.size() % 8 == 0, "header not padded to 8 bytes");
  const uint64_t data_bytes = static_cast<uint64_t>(total);
  st::Header parsed;
  std::string error;
  bool ok = fuzz::expect_input_error([&] { parsed = st::parse_header_prefix(header, header.size() + data_bytes, "fuzz.safetensors"); }, &error);
  MOEPACK_FUZZ_CHECK(ok, "the reader refuses what the writer wrote: " + error);
  MOEPACK_FUZZ_CHECK(parsed.metadata == metadata && parsed.has_metadata == !metadata.empty(), "metadata changed");
  MOEPACK_FUZZ_CHECK(parsed.tensors.size() == specs.size(), "tensor count changed");
  for (size_t i = 0; i < specs.size(); ++i) {
    const st::TensorInfo& t = parsed.tensors[i];
    MOEPACK_FUZZ_CHECK(t.name == specs[i].name && t.dtype == specs[i].dtype && t.shape == specs[i].shape,
                       "tensor " + std::to_string(i) + " changed: " + t.name);
  }

  // Small enough to write for real: stream it in fuzz-chosen chunks and read it back.
  if (data_bytes > (1u << 16)) return;
  static fuzz::ScratchDir dir;
  const std::string path = dir.file("roundtrip.safetensors");
  std::vector<uint8_t> payload(static_cast<size_t>(data_bytes));
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 131 + 7);
  {
    st::Writer w(path, specs, metadata);
    std::span<const uint8_t> rest(payload);
    while (!rest.empty()) {
      size_t n = std::min(rest.size(), static_cast<size_t>(in.in_range(1, 4096)));
      w.write(rest.first(n));
      rest = rest.subspan(n);
    }
    w.commit();
  }
  st::File f(path);
  size_t offset = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const st::TensorInfo* t = f.find(specs[i].name);
    MOEPACK_FUZZ_CHECK(t != nullptr, "written tensor not found: " + specs[i].name);
    std::span<const uint8_t> bytes = f.data(*t);
    MOEPACK_FUZZ_CHECK(std::equal(bytes.begin(), bytes.end(), payload.begin() + static_cast<long>(offset)), "bytes changed: " + specs[i].name);
    offset += bytes.size();
  }
}
