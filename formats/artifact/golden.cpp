#include "formats/artifact/golden.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <zstd.h>

#include "formats/safetensors/header.h"
#include "formats/safetensors/strict_json.h"
#include "formats/safetensors/writer.h"
#include "lib/core/error.h"
#include "lib/core/file_io.h"
#include "lib/core/hash.h"
#include "lib/core/tensor.h"

namespace moepack::artifact {
namespace {

constexpr const char* kKeys[] = {"format", "moepack_version", "reference", "artifact", "seed", "tokens", "tensor_hashes"};

bool is_hash_text(const std::string& s) {
  return s.size() == 32 && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// A decimal integer as Python's str(int) writes a non-negative one: digits only, no sign, no
// leading zero, at most 2^64 - 1.
bool parse_decimal(const std::string& s, uint64_t& out) {
  if (s.empty() || s.size() > 20 || (s.size() > 1 && s[0] == '0')) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  out = v;
  return true;
}

struct ZstdDCtx {
  ZSTD_DCtx* ctx = ZSTD_createDCtx();
  ~ZstdDCtx() { ZSTD_freeDCtx(ctx); }
};

// The frame's content, never more than `limit` bytes: the declared size is checked before any
// allocation, and a frame without a declared size is inflated in chunks against the same bound.
std::vector<uint8_t> inflate_one_frame(std::span<const uint8_t> bytes, const std::string& path, uint64_t limit) {
  auto bad = [&](const std::string& rule) { throw_bad_input(path, "", "golden file: " + rule); };
  // RFC 8878 3.1.1: magic 0xFD2FB528 (little-endian), then the frame header descriptor whose
  // bit 2 is Content_Checksum_flag. Skippable frames have other magics and are refused here.
  static constexpr uint8_t kMagic[4] = {0x28, 0xB5, 0x2F, 0xFD};
  if (bytes.size() < 5 || !std::equal(std::begin(kMagic), std::end(kMagic), bytes.begin()))
    bad("not a zstd frame (expected one zstd-compressed safetensors file)");
  if (!((bytes[4] >> 2) & 1)) bad("the zstd frame carries no content checksum");
  const unsigned long long content_size = ZSTD_getFrameContentSize(bytes.data(), bytes.size());
  if (content_size == ZSTD_CONTENTSIZE_ERROR) bad("corrupt zstd frame header");
  const size_t frame_size = ZSTD_findFrameCompressedSize(bytes.data(), bytes.size());
  if (ZSTD_isError(frame_size)) bad(std::string("truncated or corrupt zstd frame (") + ZSTD_getErrorName(frame_size) + ")");
  if (frame_size != bytes.size()) bad(std::to_string(bytes.size() - frame_size) + " bytes after the zstd frame");
  if (content_size != ZSTD_CONTENTSIZE_UNKNOWN && content_size > limit)
    bad("the frame declares " + std::to_string(content_size) + " bytes, above the " + std::to_string(limit) + "-byte limit");

  ZstdDCtx d;
  if (!d.ctx) throw_internal("zstd: cannot create a decompression context");
  // Keeps a hostile window size from allocating more than the content could need.
  ZSTD_DCtx_setParameter(d.ctx, ZSTD_d_windowLogMax, 27);
  std::vector<uint8_t> out;
  const size_t chunk = ZSTD_DStreamOutSize();
  ZSTD_inBuffer in{bytes.data(), bytes.size(), 0};
  for (;;) {
    // Room for one more byte than the limit, so that content past it is seen and refused.
    const size_t room = static_cast<size_t>(std::min<uint64_t>(chunk, limit + 1 - out.size()));
    const size_t before = out.size();
    out.resize(before + room);
    ZSTD_outBuffer o{out.data() + before, room, 0};
    const size_t in_before = in.pos;
    const size_t ret = ZSTD_decompressStream(d.ctx, &o, &in);
    out.resize(before + o.pos);
    if (ZSTD_isError(ret)) bad(std::string("corrupt zstd frame (") + ZSTD_getErrorName(ret) + ")");
    if (out.size() > limit) bad("the content inflates past the " + std::to_string(limit) + "-byte limit");
    if (ret == 0) break;
    if (o.pos == 0 && in.pos == in_before) bad("truncated zstd frame");
  }
  if (content_size != ZSTD_CONTENTSIZE_UNKNOWN && out.size() != content_size)
    bad("the frame declares " + std::to_string(content_size) + " bytes but holds " + std::to_string(out.size()));
  return out;
}

}  // namespace

std::vector<uint8_t> encode_golden(const Golden& g) {
  auto bad = [](const std::string& what) { throw Error(ErrorKind::usage, "golden file contents: " + what); };
  if (!is_hash_text(g.artifact)) bad("`artifact` must be 32 lowercase hex digits");
  nlohmann::ordered_json hashes = nlohmann::ordered_json::object();
  for (const auto& [name, hash] : g.tensor_hashes) {
    if (!is_hash_text(hash)) bad("hash of " + name + " must be 32 lowercase hex digits");
    hashes[name] = hash;
  }
  std::map<std::string, std::string> metadata = {
      {"format", kGoldenFormat},        {"moepack_version", g.moepack_version}, {"reference", g.reference},
      {"artifact", g.artifact},         {"seed", std::to_string(g.seed)},       {"tokens", std::to_string(g.tokens)},
      {"tensor_hashes", hashes.dump()},
  };
  std::vector<st::TensorSpec> specs;
  std::map<std::string, const GoldenTensor*> by_name;
  for (const auto& t : g.outputs) {
    if (!by_name.emplace(t.name, &t).second) bad("two outputs named " + t.name);
    if (t.bytes.size() != byte_size(t.dtype, t.shape)) bad("output " + t.name + " holds " + std::to_string(t.bytes.size()) + " bytes, its shape needs " +
                                                        std::to_string(byte_size(t.dtype, t.shape)));
    specs.push_back({t.name, t.dtype, t.shape});
  }
  st::sort_like_reference_writer(specs);
  std::vector<uint8_t> file = st::build_header(specs, metadata, "golden file");
  for (const auto& s : specs) file.insert(file.end(), by_name[s.name]->bytes.begin(), by_name[s.name]->bytes.end());

  std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> c(ZSTD_createCCtx(), ZSTD_freeCCtx);
  if (!c) throw_internal("zstd: cannot create a compression context");
  ZSTD_CCtx_setParameter(c.get(), ZSTD_c_compressionLevel, 12);
  ZSTD_CCtx_setParameter(c.get(), ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(c.get(), ZSTD_c_contentSizeFlag, 1);
  std::vector<uint8_t> out(ZSTD_compressBound(file.size()));
  const size_t n = ZSTD_compress2(c.get(), out.data(), out.size(), file.data(), file.size());
  if (ZSTD_isError(n)) throw_internal(std::string("zstd: ") + ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

Golden decode_golden(std::span<const uint8_t> bytes, const std::string& path, uint64_t max_decompressed) {
  auto bad = [&](const std::string& tensor, const std::string& rule) { throw_bad_input(path, tensor, "golden file: " + rule); };
  const std::vector<uint8_t> file = inflate_one_frame(bytes, path, max_decompressed);
  const st::Header h = st::parse_header(file, path);  // every safetensors rule, data region included
  if (!h.has_metadata) bad("", "no __metadata__");
  for (const auto& [key, value] : h.metadata)
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) bad("", "unknown metadata key `" + key + "`");
  auto field = [&](const char* key) -> const std::string& {
    auto it = h.metadata.find(key);
    if (it == h.metadata.end()) bad("", "metadata `" + std::string(key) + "` is missing");
    return it->second;
  };
  if (field("format") != kGoldenFormat) bad("", "format is `" + field("format") + "`, expected `" + kGoldenFormat + "`");
  Golden g;
  g.moepack_version = field("moepack_version");
  g.reference = field("reference");
  g.artifact = field("artifact");
  if (!is_hash_text(g.artifact)) bad("", "metadata `artifact` is not 32 lowercase hex digits");
  if (!parse_decimal(field("seed"), g.seed)) bad("", "metadata `seed` is not a decimal integer");
  if (!parse_decimal(field("tokens"), g.tokens)) bad("", "metadata `tokens` is not a decimal integer");
  const nlohmann::json hashes = parse_strict_json(field("tensor_hashes"), path + " (metadata tensor_hashes)");
  if (!hashes.is_object()) bad("", "metadata `tensor_hashes` is not a JSON object");
  for (auto it = hashes.begin(); it != hashes.end(); ++it) {
    if (!it.value().is_string() || !is_hash_text(it.value().get<std::string>()))
      bad(it.key(), "tensor_hashes: the hash is not 32 lowercase hex digits");
    g.tensor_hashes[it.key()] = it.value().get<std::string>();
  }
  const std::span<const uint8_t> data = std::span<const uint8_t>(file).subspan(static_cast<size_t>(h.data_start()));
  for (const auto& t : h.tensors) {
    GoldenTensor o;
    o.name = t.name;
    o.dtype = t.dtype;
    o.shape = t.shape;
    auto region = data.subspan(static_cast<size_t>(t.begin), static_cast<size_t>(t.num_bytes()));
    o.bytes.assign(region.begin(), region.end());
    g.outputs.push_back(std::move(o));
  }
  return g;
}

void write_golden(const std::string& path, const Golden& golden) {
  const std::vector<uint8_t> bytes = encode_golden(golden);
  const std::string partial = path + ".partial";
  int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw_io(partial, "cannot create", errno);
  try {
    write_all(fd, bytes, partial);
  } catch (...) {
    ::close(fd);
    ::unlink(partial.c_str());
    throw;
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int e = errno;
    ::unlink(partial.c_str());
    throw_io(partial, "cannot flush", e);
  }
  if (::rename(partial.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(partial.c_str());
    throw_io(path, "cannot rename into place", e);
  }
}

Golden read_golden(const std::string& path, uint64_t max_decompressed) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw_io(path, "cannot open", errno);
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw_bad_input(path, "", "golden file: not a regular file");
  }
  // Not read into memory past the bound either: a frame is at most a few bytes per block larger
  // than its content, so a file above the bound cannot hold content within it.
  if (static_cast<uint64_t>(st.st_size) > max_decompressed) {
    ::close(fd);
    throw_bad_input(path, "", "golden file: " + std::to_string(st.st_size) + " bytes, above the " + std::to_string(max_decompressed) + "-byte limit");
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::pread(fd, bytes.data() + got, bytes.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n < 0 ? errno : 0;
      ::close(fd);
      if (e) throw_io(path, "cannot read", e);
      throw Error(ErrorKind::io, path + ": the file ended early (it changed while being read)");
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  return decode_golden(bytes, path, max_decompressed);
}

}  // namespace moepack::artifact
