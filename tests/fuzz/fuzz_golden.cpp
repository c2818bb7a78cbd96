// The golden-file reader (zstd frame around a safetensors file with golden metadata). The first
// input byte picks what the rest is: odd = the file's bytes as they are (frame parsing, bounds,
// checksum); even = the content of a frame this target wraps with a valid checksum, so the
// mutations reach the safetensors and metadata checks behind the frame. Properties: refusals
// are bad-input errors naming the file; the decompressed size never passes the limit given; a
// golden file that is accepted is written back to a file that reads back equal.
// fuzz-links: moepack_artifact
// fuzz-max-len: 8192
#include <zstd.h>

#include "formats/artifact/golden.h"
#include "fuzz/fuzz_target.h"

MOEPACK_FUZZ_TARGET(golden) {
  using namespace moepack;
  if (size == 0) return;
  constexpr const char* kPath = "fuzz.golden";
  constexpr uint64_t kLimit = uint64_t{1} << 20;
  std::vector<uint8_t> bytes;
  if (data[0] & 1) {
    bytes.assign(data + 1, data + size);
  } else {
    ZSTD_CCtx* c = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 1);
    bytes.resize(ZSTD_compressBound(size - 1));
    const size_t n = ZSTD_compress2(c, bytes.data(), bytes.size(), data + 1, size - 1);
    ZSTD_freeCCtx(c);
    if (ZSTD_isError(n)) fuzz::violated(std::string("zstd could not compress the input: ") + ZSTD_getErrorName(n));
    bytes.resize(n);
  }
  artifact::Golden golden;
  std::string error;
  if (!fuzz::expect_input_error([&] { golden = artifact::decode_golden(bytes, kPath, kLimit); }, &error)) {
    MOEPACK_FUZZ_CHECK(error.find(kPath) != std::string::npos, "message does not name the file: " + error);
    return;
  }
  std::vector<uint8_t> again;
  try {
    again = artifact::encode_golden(golden);
  } catch (const Error& e) {
    fuzz::violated(std::string("an accepted golden file cannot be written back: ") + e.what());
  }
  artifact::Golden reread;
  const bool ok = fuzz::expect_input_error([&] { reread = artifact::decode_golden(again, kPath, kLimit + 4096); }, &error);
  MOEPACK_FUZZ_CHECK(ok, "a golden file this reader accepted is refused once written back: " + error);
  MOEPACK_FUZZ_CHECK(reread == golden, "the round trip changed the golden file");
}
