// Runs the generated malformed corpus (malformed_corpus.h) against the readers: every case is
// refused with moepack::Error, exit code 4 (or 6 for I/O), and a message naming the offending
// file. In-process through st::File and st::ShardSet, and through `moepack inspect` for a
// representative subset once that subcommand exists.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "formats/safetensors/file.h"
#include "formats/safetensors/header.h"
#include "safetensors/malformed_corpus.h"
#include "support/test_support.h"

namespace moepack::st {
namespace {
namespace fs = std::filesystem;
using test::corpus::CorpusCase;

const std::vector<CorpusCase>& corpus() {
  static const std::vector<CorpusCase> cases = test::corpus::malformed_corpus();
  return cases;
}

// Expects `open` to throw moepack::Error with the case's exit code and `culprit` in the message.
template <class Open>
void expect_refused(const CorpusCase& c, const std::string& culprit, Open open) {
  try {
    open();
    ADD_FAILURE() << c.name << ": accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), c.exit_code) << c.name << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find(culprit), std::string::npos) << c.name << ": the message does not name " << culprit << ": " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << c.name << ": an exception other than moepack::Error: " << e.what();
  }
}

TEST(MalformedCorpus, IsLargeAndCoversEveryFamily) {
  EXPECT_GT(corpus().size(), 500u);
  size_t directories = 0, representative = 0;
  for (const CorpusCase& c : corpus()) {
    directories += c.open.empty();
    representative += c.representative;
  }
  EXPECT_GE(directories, 30u);
  EXPECT_GE(representative, 30u);
}

TEST(MalformedCorpus, EveryCaseIsRefusedNamingTheFile) {
  test::TempDir dir;
  for (const CorpusCase& c : corpus()) {
    std::string path = test::corpus::materialize(c, dir.path());
    std::string culprit = (fs::path(dir.path()) / c.name / c.culprit).string();
    expect_refused(c, culprit, [&] { ShardSet set(path); });
    if (!c.open.empty()) expect_refused(c, culprit, [&] { File f(path); });
  }
}

TEST(MalformedCorpus, ValidFilesAreAccepted) {
  test::TempDir dir;
  for (const auto& [name, bytes] : test::corpus::valid_files()) {
    std::string path = dir.file(name + ".safetensors");
    test::write_file(path, bytes);
    EXPECT_NO_THROW(File f(path)) << name;
  }
  // The index fixture opens with every valid index text.
  for (const std::string& text : test::corpus::valid_index_texts()) {
    test::TempDir ckpt;
    for (const auto& [rel, bytes] : test::corpus::index_fixture_shards()) test::write_file(ckpt.file(rel), bytes);
    test::write_text(ckpt.file("model.safetensors.index.json"), text);
    EXPECT_NO_THROW(ShardSet set(ckpt.path())) << text;
  }
}

TEST(MalformedCorpus, HundredThousandTensorsParse) {
  // ERRATA "Reader pitfalls": headers of this size exist in sharded giant models. No timing
  // assertion (sanitizer builds are slow); the time is printed for the record.
  const size_t n = 100'000;
  std::vector<uint8_t> bytes = test::corpus::st_bytes(test::corpus::many_tensors_header(n, true), n);
  auto start = std::chrono::steady_clock::now();
  Header h = parse_header(bytes, "many.safetensors");
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(h.tensors.size(), n);
  EXPECT_EQ(h.tensors.back().end, n);
  std::cout << "[ note ] " << n << " tensors (" << bytes.size() << " header+data bytes) parsed in " << ms << " ms\n";
}

// The CLI pass: `moepack inspect` on the representative cases must exit 4 (or the case's code)
// and name the file on stderr. A broken `inspect` fails here: it is never skipped.
TEST(MalformedCorpus, InspectRefusesRepresentativeCases) {
  ASSERT_EQ(test::run_moepack({"inspect", "--help"}).exit_code, 0) << "`moepack inspect --help` must work";
  test::TempDir dir;
  size_t run = 0;
  for (const CorpusCase& c : corpus()) {
    if (!c.representative) continue;
    std::string path = test::corpus::materialize(c, dir.path());
    std::string culprit = (fs::path(dir.path()) / c.name / c.culprit).string();
    test::CommandResult r = test::run_moepack({"inspect", path});
    EXPECT_EQ(r.exit_code, c.exit_code) << c.name << ": " << r.err;
    EXPECT_NE(r.err.find(culprit), std::string::npos) << c.name << ": stderr does not name " << culprit << ": " << r.err;
    ++run;
  }
  EXPECT_GE(run, 30u);
}

}  // namespace
}  // namespace moepack::st
