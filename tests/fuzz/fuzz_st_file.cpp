// st::File and st::ShardSet on one file of arbitrary bytes, through the real path: open, map,
// validate, look tensors up and touch every tensor's first and last byte (AddressSanitizer
// sees any view that leaves the mapping).
// fuzz-links: moepack_safetensors
#include "formats/safetensors/file.h"
#include "fuzz/fuzz_scratch.h"
#include "fuzz/fuzz_target.h"

MOEPACK_FUZZ_TARGET(st_file) {
  using namespace moepack;
  static fuzz::MemFile file("st_file.safetensors");
  file.set(data, size);
  std::string error;
  bool ok = fuzz::expect_input_error(
      [&] {
        st::File f(file.path());
        MOEPACK_FUZZ_CHECK(f.file_size() == size, "mapped size differs from the input");
        volatile uint8_t sink = 0;
        for (const st::TensorInfo& t : f.header().tensors) {
          MOEPACK_FUZZ_CHECK(f.find(t.name) == &t, "find() does not return the tensor: " + t.name);
          std::span<const uint8_t> bytes = f.data(t);
          MOEPACK_FUZZ_CHECK(bytes.size() == t.num_bytes(), "view size differs from the header: " + t.name);
          if (!bytes.empty()) sink = sink ^ bytes.front() ^ bytes.back();
        }
        st::ShardSet set(file.path());
        MOEPACK_FUZZ_CHECK(set.tensor_count() == f.header().tensors.size(), "the shard set lost or gained tensors");
        for (const std::string& name : set.names()) {
          auto ref = set.find(name);
          MOEPACK_FUZZ_CHECK(ref && ref->data().size() == ref->info->num_bytes(), "shard set lookup failed: " + name);
        }
      },
      &error);
  if (!ok) MOEPACK_FUZZ_CHECK(error.find(file.path()) != std::string::npos, "message does not name the file: " + error);
}
