// parse_header on arbitrary bytes: the reader's first contact with a stranger's file.
// Beyond "no crash": an accepted header satisfies the invariants the rest of moepack relies on,
// an error names the file, and the prefix entry point (readers that do not map the whole file)
// reaches the same verdict from the header bytes alone.
// fuzz-links: moepack_safetensors
#include <algorithm>
#include <set>

#include "formats/safetensors/header.h"
#include "fuzz/fuzz_target.h"

namespace {

constexpr const char* kPath = "fuzz.safetensors";

void check_invariants(const moepack::st::Header& h, size_t file_size) {
  using namespace moepack::st;
  MOEPACK_FUZZ_CHECK(h.header_length <= kMaxHeaderBytes, "header length above the cap");
  MOEPACK_FUZZ_CHECK(h.tensors.size() <= kMaxTensors, "tensor count above the cap");
  uint64_t running = 0;
  std::set<std::string> names;
  for (const TensorInfo& t : h.tensors) {
    MOEPACK_FUZZ_CHECK(t.shape.size() <= kMaxRank, t.name);
    MOEPACK_FUZZ_CHECK(t.name.size() <= kMaxNameBytes, "name above the cap");
    MOEPACK_FUZZ_CHECK(names.insert(t.name).second, "duplicate name accepted: " + t.name);
    MOEPACK_FUZZ_CHECK(t.begin == running && t.end >= t.begin, "tensors not contiguous in file order: " + t.name);
    MOEPACK_FUZZ_CHECK(tensor_byte_size(t.dtype, t.shape, kPath, t.name) == t.num_bytes(), "size does not match shape: " + t.name);
    running = t.end;
  }
  MOEPACK_FUZZ_CHECK(h.data_start() + running == file_size, "data region not covered exactly");
}

}  // namespace

MOEPACK_FUZZ_TARGET(st_header) {
  using namespace moepack;
  std::span<const uint8_t> file(data, size);
  st::Header whole;
  std::string whole_error;
  bool ok = fuzz::expect_input_error([&] { whole = st::parse_header(file, kPath); }, &whole_error);
  if (!ok) MOEPACK_FUZZ_CHECK(whole_error.find(kPath) != std::string::npos, "message does not name the file: " + whole_error);
  else check_invariants(whole, size);

  // The prefix entry point, given exactly the bytes it asks for.
  size_t prefix_len = size;
  if (size >= 8) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
    if (n <= st::kMaxHeaderBytes) prefix_len = static_cast<size_t>(std::min<uint64_t>(size, 8 + n));
  }
  st::Header prefix;
  std::string prefix_error;
  bool prefix_ok = fuzz::expect_input_error([&] { prefix = st::parse_header_prefix(file.first(prefix_len), size, kPath); }, &prefix_error);
  MOEPACK_FUZZ_CHECK(prefix_ok == ok, "whole-file and prefix verdicts differ: " + whole_error + " | " + prefix_error);
  MOEPACK_FUZZ_CHECK(prefix_error == whole_error, "whole-file and prefix errors differ: " + whole_error + " | " + prefix_error);
  if (ok) MOEPACK_FUZZ_CHECK(prefix.tensors.size() == whole.tensors.size() && prefix.metadata == whole.metadata, "prefix parse differs");
}
