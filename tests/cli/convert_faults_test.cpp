// `moepack convert` when the machine misbehaves: the output disk fills up, the output's parent
// cannot be written, a source shard is truncated while it is being read, the process is killed
// with SIGKILL. docs/CLI.md: an I/O failure is exit 6 with a message naming the file, and nothing
// partial is left behind (neither OUT nor OUT.tmp); a later run on the same paths succeeds.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/test_support.h"

namespace moepack::test {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string gpt_oss_sample() { return source_dir() + "/samples/gpt-oss-mxfp4"; }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// `moepack ARGS...` in a forked child whose stderr goes to `err_file`; `in_child` runs in the
// child before exec (resource limits). The caller waits with finish().
pid_t spawn_moepack(const std::vector<std::string>& args, const std::string& err_file, const std::function<void()>& in_child = {}) {
  std::vector<std::string> argv_storage = {"moepack"};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string binary = moepack_binary();
  pid_t pid = ::fork();
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_RDWR);
    int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (devnull < 0 || err < 0) _exit(126);
    ::dup2(devnull, 0);
    ::dup2(devnull, 1);
    ::dup2(err, 2);
    if (in_child) in_child();
    ::execv(binary.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

struct Finished {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  std::string err;
};

Finished finish(pid_t pid, const std::string& err_file) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  Finished f;
  if (WIFEXITED(status)) f.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) f.signal = WTERMSIG(status);
  f.err = slurp(err_file);
  return f;
}

void expect_nothing_left(const std::string& out) {
  EXPECT_FALSE(fs::exists(out)) << out;
  EXPECT_FALSE(fs::exists(out + ".tmp")) << out << ".tmp";
}

// The same output path works again: nothing the failed run left (a stale OUT.tmp, a lock)
// stands in the way. The small sample keeps this quick; the failure did not depend on it.
void expect_later_run_succeeds(const std::string& out) {
  CommandResult r = run_moepack({"convert", gpt_oss_sample(), "--target", "sm90", "-o", out});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out + "/moepack.json"));
  EXPECT_FALSE(fs::exists(out + ".tmp"));
}

// A real-shape gpt-oss-20b layer (sparse: it costs no disk and no data pages), big enough that
// a one-thread conversion is still running when the test intervenes.
std::string real_shape_source(const TempDir& dir) {
  const std::string src = dir.file("src");
  CommandResult r = run_moepack({"sample", "--family", "gpt-oss-mxfp4", "--real-shape", "gpt-oss-20b", "--sparse", "--layers", "1", "-o", src});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return src;
}

// The largest .safetensors file of a checkpoint directory (the one holding the experts).
std::string largest_shard(const std::string& dir) {
  std::string best;
  uintmax_t best_size = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors" && e.file_size() >= best_size) {
      best_size = e.file_size();
      best = e.path().string();
    }
  return best;
}

// Whether process `pid` has `file` mapped (the checkpoint is open: its shards are mmapped).
bool has_mapped(pid_t pid, const std::string& file) {
  return slurp("/proc/" + std::to_string(pid) + "/maps").find(fs::canonical(file).string()) != std::string::npos;
}

TEST(ConvertFaults, OutputDiskFullIsAnIoErrorAndLeavesNothing) {
  TempDir dir;
  const std::string out = dir.file("out"), err = dir.file("stderr");
  // RLIMIT_FSIZE stands in for a full disk: main.cpp ignores SIGXFSZ, so the write that crosses
  // the limit fails with EFBIG like ENOSPC would. The sample's artifact is ~300 kB; 64 kB is hit
  // inside the first safetensors file. (stderr is a file too, but far below the limit.)
  pid_t pid = spawn_moepack({"convert", gpt_oss_sample(), "--target", "sm90", "-o", out}, err, [] {
    struct rlimit limit{64 * 1024, 64 * 1024};
    ::setrlimit(RLIMIT_FSIZE, &limit);
  });
  ASSERT_GT(pid, 0);
  Finished f = finish(pid, err);
  EXPECT_EQ(f.signal, 0) << "killed by signal " << f.signal;
  EXPECT_EQ(f.exit_code, 6) << f.err;
  EXPECT_NE(f.err.find(out + ".tmp/"), std::string::npos) << "the message should name the file being written: " << f.err;
  expect_nothing_left(out);
  expect_later_run_succeeds(out);
}

TEST(ConvertFaults, UnwritableOutputParentIsAnIoErrorNamingIt) {
  TempDir dir;
  std::string parent = dir.file("parent");
  fs::create_directories(parent);
  std::string out;
  if (::geteuid() != 0) {
    ::chmod(parent.c_str(), 0555);
    out = parent + "/out";
  } else {
    // Root ignores directory permissions, so mode 0555 would not stop it. A path under a regular
    // file fails the same way for everyone (mkdir: ENOTDIR) and exercises the same error path.
    parent = dir.file("a_regular_file");
    write_text(parent, "not a directory\n");
    out = parent + "/out";
  }
  CommandResult r = run_moepack({"convert", gpt_oss_sample(), "--target", "sm90", "-o", out});
  EXPECT_EQ(r.exit_code, 6) << r.err;
  EXPECT_NE(r.err.find(out), std::string::npos) << "the message should name the output: " << r.err;
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  // Once the parent is usable, the same command succeeds.
  if (::geteuid() != 0) {
    ::chmod(parent.c_str(), 0755);
  } else {
    fs::remove(parent);
    fs::create_directories(parent);
  }
  expect_later_run_succeeds(out);
}

// The shard is truncated while the conversion reads it: the mapping must never turn into SIGBUS,
// the run ends with exit 6 naming the shard. Three moments, each found by watching the child
// and then freezing it (SIGSTOP) while the file shrinks under it: right after the checkpoint is
// opened (its shard is mapped; the value scan reads through the mapping next), while the
// non-expert tensors are copied (OUT.tmp exists; the copy comes first, in name order: lm_head,
// embed_tokens), and while experts are packed (--progress has reported a batch of experts).
// The shard is cut to 1 MiB, just past its header, so every later data access is past its end.
TEST(ConvertFaults, SourceTruncatedAfterOpenIsAnIoErrorNamingTheShard) {
  TempDir dir;
  const std::string src = real_shape_source(dir);
  const std::string shard = largest_shard(src);
  ASSERT_FALSE(shard.empty());
  const uintmax_t full_size = fs::file_size(shard);
  const std::string out = dir.file("out"), err = dir.file("stderr");

  for (const std::string moment : {"after open", "while copying", "while packing"}) {
    SCOPED_TRACE(moment);
    ::truncate(shard.c_str(), static_cast<off_t>(full_size));  // sparse again: zeros, as generated
    const bool scan = moment == "after open";                   // the value scan reads the scales
    std::vector<std::string> args = {"convert", src, "--target", "sm90", "-o", out, "--threads", "1", "--progress"};
    if (!scan) args.push_back("--allow-bad-values");
    pid_t pid = spawn_moepack(args, err);
    ASSERT_GT(pid, 0);
    // Stop the child at the moment, truncate under it, let it go on.
    auto at_moment = [&] {
      if (moment == "after open") return has_mapped(pid, shard);
      if (moment == "while copying") return fs::exists(out + ".tmp");
      return slurp(err).find(" experts") != std::string::npos;
    };
    bool reached = false;
    for (int i = 0; i < 20000 && !reached; ++i) {
      reached = at_moment();
      if (!reached) std::this_thread::sleep_for(1ms);
    }
    ::kill(pid, SIGSTOP);
    EXPECT_TRUE(reached) << "the conversion never reached the moment";
    ASSERT_EQ(::truncate(shard.c_str(), 1 << 20), 0);
    ::kill(pid, SIGCONT);
    Finished f = finish(pid, err);
    EXPECT_EQ(f.signal, 0) << "killed by signal " << f.signal << " (SIGBUS is " << SIGBUS << "): " << f.err;
    EXPECT_EQ(f.exit_code, 6) << f.err;
    EXPECT_NE(f.err.find(shard), std::string::npos) << "the message should name the shard: " << f.err;
    expect_nothing_left(out);
  }
  expect_later_run_succeeds(out);
}

TEST(ConvertFaults, KilledRunIsTakenOverByTheNextOne) {
  TempDir dir;
  const std::string src = real_shape_source(dir);
  const std::string out = dir.file("out"), err = dir.file("stderr");
  pid_t pid = spawn_moepack({"convert", src, "--target", "sm90", "-o", out, "--threads", "1", "--allow-bad-values"}, err);
  ASSERT_GT(pid, 0);
  for (int i = 0; i < 4000 && !fs::exists(out + ".tmp"); ++i) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(50ms);  // into the packing, with files open in the staging directory
  ::kill(pid, SIGKILL);
  Finished f = finish(pid, err);
  ASSERT_EQ(f.signal, SIGKILL) << "the conversion finished before the kill; exit " << f.exit_code;
  // SIGKILL runs no cleanup: the staging directory stays, with the dead process as its owner.
  EXPECT_TRUE(fs::exists(out + ".tmp"));
  EXPECT_FALSE(fs::exists(out));
  expect_later_run_succeeds(out);
}

}  // namespace
}  // namespace moepack::test
