// A generated corpus of malformed safetensors checkpoints (single files and sharded
// directories). Every case must be refused with moepack::Error, exit code 4 (bad input) or 6
// (I/O), and a message naming the offending file; a crash or a hang is a bug.
//
// The corpus is data, not a test: malformed_corpus_test.cpp runs it in-process against
// st::File / st::ShardSet (and through `moepack inspect` once that subcommand exists), and the
// fuzz seed generator (tests/fuzz/make_seeds.cpp) writes it out as seed inputs. Mutations are
// systematic (every length-prefix variant, every truncation point, a bit flip in every header
// byte, ...) rather than random, so a failure names a reproducible case.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moepack::test::corpus {

struct CorpusCase {
  std::string name;  // unique and file-system safe; also the case's directory name
  // Relative path -> bytes. A path ending in '/' is created as an (empty) directory.
  std::map<std::string, std::vector<uint8_t>> files;
  std::string open;     // relative path handed to the reader; "" means the case directory itself
  std::string culprit;  // relative path the error message must name
  int exit_code = 4;
  bool representative = false;  // one of the ~30 cases also run through the CLI
};

std::vector<CorpusCase> malformed_corpus();

// Valid files: the upstream test vectors and probes the reference accepts. Fuzz seeds, and a
// sanity check that the corpus helpers build well-formed files when asked to.
std::vector<std::pair<std::string, std::vector<uint8_t>>> valid_files();

// Valid model.safetensors.index.json texts over the shards of `index_fixture_shards()`.
std::vector<std::string> valid_index_texts();
// Two small valid shards ("model-00001-of-00002.safetensors" holding `a`,
// "model-00002-of-00002.safetensors" holding `b`) that the index cases point into.
std::map<std::string, std::vector<uint8_t>> index_fixture_shards();

// 8-byte little-endian prefix `declared`, then `header`, then `data_bytes` bytes of 0x5A.
std::vector<uint8_t> st_bytes(uint64_t declared, std::string_view header, size_t data_bytes);
// Same with the prefix equal to the header's length.
std::vector<uint8_t> st_bytes(std::string_view header, size_t data_bytes);

// A header with `count` U8[1] tensors "t0".."t{count-1}", contiguous when `contiguous`,
// otherwise all at [0, 1] (the overlap attack). The data region is `count` bytes.
std::string many_tensors_header(size_t count, bool contiguous);

// Creates the case's files under `dir` (which must exist) and returns the path to open.
std::string materialize(const CorpusCase& c, const std::string& dir);

}  // namespace moepack::test::corpus
