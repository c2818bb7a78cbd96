// The streaming writer: byte-exact output for the upstream golden vectors
// (checkpoint-formats.md 1.4), round trips through st::File, and the atomic-write contract
// (PATH.partial, nothing left behind on failure, errors of the right kind).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fcntl.h>
#include <filesystem>

#include "formats/safetensors/file.h"
#include "formats/safetensors/writer.h"
#include "lib/core/error.h"
#include "lib/core/hash.h"
#include "support/test_support.h"

namespace moepack::st {
namespace {
namespace fs = std::filesystem;

std::string header_json(const std::vector<uint8_t>& file) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file[static_cast<size_t>(i)];
  return std::string(file.begin() + 8, file.begin() + 8 + static_cast<long>(n));
}

std::vector<uint8_t> write_and_read(const std::string& path, const std::vector<TensorSpec>& specs, const std::vector<uint8_t>& data,
                                    const std::map<std::string, std::string>& metadata = {}) {
  Writer w(path, specs, metadata);
  w.write(data);
  w.commit();
  return test::read_file(path);
}

TEST(WriterGolden, Serialization) {
  test::TempDir dir;
  std::vector<uint8_t> data(24);
  for (int i = 0; i < 6; ++i) {
    float f = static_cast<float>(i);
    std::memcpy(data.data() + 4 * i, &f, 4);
  }
  auto file = write_and_read(dir.file("a.safetensors"), {{"attn.0", DType::F32, {1, 2, 3}}}, data);
  ASSERT_EQ(file.size(), 96u);
  EXPECT_EQ(header_json(file), R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})");
  EXPECT_TRUE(std::equal(data.begin(), data.end(), file.begin() + 72));
}

TEST(WriterGolden, Fp4AndForcedAlignment) {
  test::TempDir dir;
  auto fp4 = write_and_read(dir.file("fp4.safetensors"), {{"attn.0", DType::F4, {1, 2}}}, {0x00});
  EXPECT_EQ(header_json(fp4), R"({"attn.0":{"dtype":"F4","shape":[1,2],"data_offsets":[0,1]}})" + std::string(4, ' '));
  auto aligned = write_and_read(dir.file("al.safetensors"), {{"attn0", DType::F32, {1, 1, 2, 3}}}, std::vector<uint8_t>(24));
  EXPECT_EQ(header_json(aligned).size(), 72u);
  EXPECT_EQ(header_json(aligned).substr(65), std::string(7, ' '));
}

TEST(WriterGolden, Empty) {
  EXPECT_EQ(build_header({}, {}, "e"), (std::vector<uint8_t>{8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '}));
  auto with_meta = build_header({}, {{"framework", "pt"}}, "e");
  ASSERT_EQ(with_meta.size(), 48u);
  EXPECT_EQ(header_json(with_meta), "{\"__metadata__\":{\"framework\":\"pt\"}}     ");
}

TEST(WriterGolden, MixedDtypesInReferenceOrder) {
  std::vector<TensorSpec> specs = {{"z_u8", DType::U8, {3}}, {"a_f32", DType::F32, {1}}, {"m_bf16", DType::BF16, {1}}};
  sort_like_reference_writer(specs);
  ASSERT_EQ(specs[0].name, "a_f32");
  ASSERT_EQ(specs[1].name, "m_bf16");
  ASSERT_EQ(specs[2].name, "z_u8");
  test::TempDir dir;
  auto file = write_and_read(dir.file("m.safetensors"), specs, std::vector<uint8_t>(9, 1), {{"format", "pt"}});
  EXPECT_EQ(file.size(), 225u);
  EXPECT_EQ(header_json(file).size(), 208u);
  File f(dir.file("m.safetensors"));
  EXPECT_EQ(f.find("m_bf16")->begin, 4u);
  EXPECT_EQ(f.find("z_u8")->end, 9u);
  EXPECT_EQ(f.header().metadata.at("format"), "pt");
}

TEST(Writer, RoundTripInChunksWithEscapedNames) {
  test::TempDir dir;
  std::vector<TensorSpec> specs = {{"w\"q\\\n\x01", DType::BF16, {3, 5}}, {"é", DType::F4, {4, 2}}, {"empty", DType::F32, {0, 7}}, {"s", DType::I64, {}}};
  std::vector<uint8_t> payload(30 + 4 + 0 + 8);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i);
  {
    Writer w(dir.file("r.safetensors"), specs);
    for (size_t i = 0; i < payload.size(); i += 5) w.write(std::span<const uint8_t>(payload).subspan(i, std::min<size_t>(5, payload.size() - i)));
    w.commit();
    EXPECT_EQ(w.total_bytes(), fs::file_size(dir.file("r.safetensors")));
  }
  File f(dir.file("r.safetensors"));
  size_t offset = 0;
  for (const TensorSpec& s : specs) {
    const TensorInfo* t = f.find(s.name);
    ASSERT_NE(t, nullptr) << s.name;
    EXPECT_EQ(t->dtype, s.dtype);
    EXPECT_EQ(t->shape, s.shape);
    auto bytes = f.data(*t);
    EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), payload.begin() + static_cast<long>(offset))) << s.name;
    offset += bytes.size();
  }
  EXPECT_FALSE(fs::exists(dir.file("r.safetensors.partial")));
}

TEST(Writer, NothingIsLeftBehindWithoutCommit) {
  test::TempDir dir;
  {
    Writer w(dir.file("x.safetensors"), {{"a", DType::U8, {4}}});
    w.write(std::vector<uint8_t>{1, 2});
    EXPECT_TRUE(fs::exists(dir.file("x.safetensors.partial")));
    EXPECT_FALSE(fs::exists(dir.file("x.safetensors")));
    try {
      w.commit();
      ADD_FAILURE() << "commit of a half-written tensor";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::internal) << e.what();
      EXPECT_NE(std::string(e.what()).find("`a`"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(Writer, MisuseIsAnInternalError) {
  test::TempDir dir;
  auto kind_of = [](auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::usage;  // "no error": no writer misuse maps to usage
  };
  EXPECT_EQ(kind_of([&] { build_header({{"a", DType::U8, {1}}, {"a", DType::U8, {1}}}, {}, "p"); }), ErrorKind::internal);
  EXPECT_EQ(kind_of([&] { build_header({{"__metadata__", DType::U8, {1}}}, {}, "p"); }), ErrorKind::internal);
  EXPECT_EQ(kind_of([&] { build_header({{"bad\xFF", DType::U8, {1}}}, {}, "p"); }), ErrorKind::internal);
  EXPECT_EQ(kind_of([&] { build_header({}, {{"k", "\xC0\x80"}}, "p"); }), ErrorKind::internal);
  EXPECT_EQ(kind_of([&] { build_header({{"a", DType::F4, {3}}}, {}, "p"); }), ErrorKind::bad_input);  // misaligned
  EXPECT_EQ(kind_of([&] { build_header({{"a", DType::U8, std::vector<uint64_t>(65, 1)}}, {}, "p"); }), ErrorKind::bad_input);  // rank cap
  EXPECT_EQ(kind_of([&] {
              Writer w(dir.file("y.safetensors"), {{"a", DType::U8, {1}}});
              w.write(std::vector<uint8_t>{1, 2});
            }),
            ErrorKind::internal);
  EXPECT_FALSE(fs::exists(dir.file("y.safetensors.partial")));
}

TEST(Writer, UnwritableDirectoryIsAnIoError) {
  try {
    Writer w("/nonexistent-moepack-dir/x.safetensors", {{"a", DType::U8, {1}}});
    ADD_FAILURE() << "created a file in a missing directory";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::io);
    EXPECT_NE(std::string(e.what()).find("/nonexistent-moepack-dir/x.safetensors.partial"), std::string::npos) << e.what();
  }
}

// A file size limit (ulimit -f) with SIGXFSZ ignored, as the CLI runs: the write fails with
// EFBIG, the error is I/O and names the file, and the partial file is removed. Run in a child
// so the limit and the signal disposition do not leak into the other tests.
TEST(Writer, FileSizeLimitIsAnIoErrorAndLeavesNothing) {
  test::TempDir dir;
  const std::string path = dir.file("big.safetensors");
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = {4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    int code = 10;
    try {
      Writer w(path, {{"a", DType::U8, {8192}}});
      w.write(std::vector<uint8_t>(8192));
      w.commit();
    } catch (const Error& e) {
      code = (e.kind() == ErrorKind::io && std::string(e.what()).find("file size limit") != std::string::npos &&
              std::string(e.what()).find(path) != std::string::npos) ? 0 : 11;
    }
    ::_exit(code);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: no error, 11: wrong kind or message";
  EXPECT_FALSE(fs::exists(path + ".partial"));
  EXPECT_FALSE(fs::exists(path));
}

// write_fed writes and hashes exactly what write() of the same bytes does, across tensor
// boundaries, at unaligned offsets and in pieces larger than one write chunk; its feed sees
// exactly the bytes, in order, as write()'s extra hash does.
TEST(WriterFed, WriteFedEqualsWriteBytesAndHashes) {
  test::TempDir dir;
  const uint64_t big = (3u << 20) + 4099;  // more than one write chunk, odd size
  std::vector<uint8_t> source(big + 777);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 131 + (i >> 9));
  const std::vector<TensorSpec> specs = {{"a", DType::U8, {5}}, {"b", DType::U8, {big - 5}}, {"c", DType::U8, {777}}};
  Writer ref(dir.file("ref.safetensors"), specs);
  Xxh3Stream extra;
  ref.write({source.data(), 3}, &extra);
  ref.write({source.data() + 3, source.size() - 3}, &extra);
  ref.commit();
  EXPECT_EQ(extra.hex(), xxh3_128_hex(source));
  Writer w(dir.file("fed.safetensors"), specs);
  w.write({source.data(), 3});
  Xxh3Stream fed;
  uint64_t fed_bytes = 0;
  const Writer::Feed feed = [&](std::span<const uint8_t> bytes) {
    fed.update(bytes);
    fed_bytes += bytes.size();
  };
  w.write_fed({source.data() + 3, big}, feed);  // from mid-tensor a into c
  w.write_fed({source.data() + 3 + big, source.size() - 3 - big}, feed);
  w.commit();
  EXPECT_EQ(fed_bytes, source.size() - 3);
  EXPECT_EQ(fed.hex(), xxh3_128_hex({source.data() + 3, source.size() - 3}));
  EXPECT_EQ(test::read_file(dir.file("fed.safetensors")), test::read_file(dir.file("ref.safetensors")));
  EXPECT_EQ(w.file_xxh3(), ref.file_xxh3());
  EXPECT_EQ(w.file_xxh3(), xxh3_128_hex(test::read_file(dir.file("fed.safetensors"))));
}

}  // namespace
}  // namespace moepack::st
