// MappedFile: what it maps, what it refuses to open (directories, devices, FIFOs — the last
// without blocking), and check_unchanged() noticing a file changed under the mapping.
#include <gtest/gtest.h>

#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/core/error.h"
#include "lib/core/mapped_file.h"
#include "support/test_support.h"

namespace moepack {
namespace {

// Expects `fn` to throw Error of `kind` whose message names `path`.
template <class Fn>
void expect_error(ErrorKind kind, const std::string& path, Fn fn) {
  try {
    fn();
    ADD_FAILURE() << "no error for " << path;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(MappedFile, MapsTheWholeFile) {
  test::TempDir dir;
  test::write_text(dir.file("f"), "hello");
  MappedFile m(dir.file("f"));
  EXPECT_EQ(m.size(), 5u);
  EXPECT_EQ(std::string(m.bytes().begin(), m.bytes().end()), "hello");
  EXPECT_EQ(m.path(), dir.file("f"));
  EXPECT_NO_THROW(m.check_unchanged());
}

// A file of 2 MiB or more starts on a 2 MiB boundary (where the kernel can map its page-cache
// folios of 2 MiB whole), reads back every byte, including an odd-sized tail past the last
// whole page, and unmaps cleanly (moved, then destroyed).
TEST(MappedFile, LargeFilesStartOnATwoMebibyteBoundary) {
  test::TempDir dir;
  std::string text(size_t{5} << 20 | 123, '\0');
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>(i * 131 + (i >> 20));
  test::write_text(dir.file("big"), text);
  MappedFile m(dir.file("big"));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m.bytes().data()) % (uintptr_t{2} << 20), 0u);
  ASSERT_EQ(m.size(), text.size());
  EXPECT_EQ(0, std::memcmp(m.bytes().data(), text.data(), text.size()));
  MappedFile moved(std::move(m));
  EXPECT_EQ(static_cast<char>(moved.bytes().back()), text.back());
}

TEST(MappedFile, EmptyFile) {
  test::TempDir dir;
  test::write_text(dir.file("empty"), "");
  MappedFile m(dir.file("empty"));
  EXPECT_EQ(m.size(), 0u);
  EXPECT_TRUE(m.bytes().empty());
}

TEST(MappedFile, MoveLeavesTheSourceEmpty) {
  test::TempDir dir;
  test::write_text(dir.file("f"), "abc");
  MappedFile a(dir.file("f"));
  MappedFile b(std::move(a));
  EXPECT_EQ(b.size(), 3u);
  EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  MappedFile c;
  c = std::move(b);
  EXPECT_EQ(c.bytes()[2], 'c');
  EXPECT_NO_THROW(c.check_unchanged());
}

TEST(MappedFile, RefusesWhatIsNotARegularFile) {
  test::TempDir dir;
  expect_error(ErrorKind::io, dir.file("missing"), [&] { MappedFile m(dir.file("missing")); });
  expect_error(ErrorKind::bad_input, dir.path(), [&] { MappedFile m(dir.path()); });
  expect_error(ErrorKind::bad_input, "/dev/null", [] { MappedFile m("/dev/null"); });
  // A FIFO has no writer: opening it for reading must not wait for one.
  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);
  expect_error(ErrorKind::bad_input, dir.file("fifo"), [&] { MappedFile m(dir.file("fifo")); });
}

TEST(MappedFile, NoticesTruncationGrowthAndRewrite) {
  test::TempDir dir;
  const std::string path = dir.file("f");
  test::write_text(path, std::string(8192, 'x'));
  {
    MappedFile m(path);
    ASSERT_EQ(::truncate(path.c_str(), 100), 0);
    expect_error(ErrorKind::io, path, [&] { m.check_unchanged(); });
  }
  {
    test::write_text(path, std::string(100, 'x'));
    MappedFile m(path);
    test::write_text(path, std::string(200, 'y'));
    expect_error(ErrorKind::io, path, [&] { m.check_unchanged(); });
  }
  {
    // Same size, new contents: only the modification time tells. Set it explicitly, since two
    // writes can fall in the same timestamp tick.
    test::write_text(path, std::string(100, 'x'));
    MappedFile m(path);
    int fd = ::open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, "z", 1, 0), 1);
    struct timespec times[2] = {{0, UTIME_OMIT}, {1'000'000'000, 0}};
    ASSERT_EQ(::futimens(fd, times), 0);
    ::close(fd);
    expect_error(ErrorKind::io, path, [&] { m.check_unchanged(); });
  }
}

}  // namespace
}  // namespace moepack
