// Model ids resolved in the local Hugging Face cache, on a cache laid out as huggingface_hub lays
// it out: files in blobs/ under hash names, each revision a snapshots/<commit>/ directory of
// relative symlinks into blobs/, branches and tags as refs/ files holding a commit.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "lib/core/hash.h"
#include "support/test_support.h"

namespace moepack::test {
namespace {
namespace fs = std::filesystem;

const std::string kOldCommit = "1111111111111111111111111111111111111111";  // tag v1.0: gpt-oss MXFP4
const std::string kNewCommit = "2222222222222222222222222222222222222222";  // main: Mixtral BF16

std::string sample(const std::string& name) { return source_dir() + "/samples/" + name; }

// Sets an environment variable for the life of the object (unset when `value` is nullopt), and
// puts back what was there before.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, std::optional<std::string> value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    if (value) ::setenv(name_.c_str(), value->c_str(), 1);
    else ::unsetenv(name_.c_str());
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_.c_str(), old_->c_str(), 1);
    else ::unsetenv(name_.c_str());
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// Adds `checkpoint_dir`'s files to the cache as the snapshot of `commit` of models--org--model.
void add_snapshot(const std::string& hub, const std::string& checkpoint_dir, const std::string& commit) {
  const fs::path repo = fs::path(hub) / "models--org--model";
  fs::create_directories(repo / "blobs");
  fs::create_directories(repo / "snapshots" / commit);
  for (const auto& e : fs::directory_iterator(checkpoint_dir)) {
    const std::vector<uint8_t> bytes = read_file(e.path().string());
    const std::string blob = xxh3_128_hex(bytes) + xxh3_128_hex(std::vector<uint8_t>(bytes.rbegin(), bytes.rend()));
    if (!fs::exists(repo / "blobs" / blob)) write_file((repo / "blobs" / blob).string(), bytes);
    fs::create_symlink(fs::path("../../blobs") / blob, repo / "snapshots" / commit / e.path().filename());
  }
}

// A hub cache holding org/model at two revisions: main (Mixtral BF16) and the tag v1.0
// (gpt-oss MXFP4), as `hf download` leaves them.
std::string make_hub_cache(const TempDir& dir) {
  const std::string hub = dir.file("hub");
  add_snapshot(hub, sample("gpt-oss-mxfp4"), kOldCommit);
  add_snapshot(hub, sample("mixtral-bf16"), kNewCommit);
  fs::create_directories(hub + "/models--org--model/refs");
  write_text(hub + "/models--org--model/refs/main", kNewCommit);  // huggingface_hub writes no newline
  write_text(hub + "/models--org--model/refs/v1.0", kOldCommit);
  return hub;
}

std::string family_of(const CommandResult& r) { return nlohmann::json::parse(r.out).at("family").get<std::string>(); }

TEST(HubCache, BranchTagAndCommitResolveToTheirSnapshots) {
  TempDir dir;
  ScopedEnv cache("HF_HUB_CACHE", make_hub_cache(dir));
  CommandResult main_rev = run_moepack({"inspect", "org/model", "--json"});
  ASSERT_EQ(main_rev.exit_code, 0) << main_rev.err;
  const auto doc = nlohmann::json::parse(main_rev.out);
  EXPECT_EQ(doc.at("hub").at("model_id"), "org/model");
  EXPECT_EQ(doc.at("hub").at("revision"), "main");
  EXPECT_EQ(doc.at("hub").at("commit"), kNewCommit);
  EXPECT_EQ(doc.at("hub").at("snapshot"), dir.file("hub") + "/models--org--model/snapshots/" + kNewCommit);
  const std::string main_family = family_of(main_rev);

  CommandResult tag = run_moepack({"inspect", "org/model@v1.0", "--json"});
  ASSERT_EQ(tag.exit_code, 0) << tag.err;
  EXPECT_EQ(nlohmann::json::parse(tag.out).at("hub").at("commit"), kOldCommit);
  EXPECT_NE(family_of(tag), main_family);
  CommandResult commit = run_moepack({"inspect", "org/model@" + kOldCommit, "--json"});
  ASSERT_EQ(commit.exit_code, 0) << commit.err;
  EXPECT_EQ(family_of(commit), family_of(tag));
  // The same checkpoint read from the samples directory: the id only changes where it is read.
  CommandResult path = run_moepack({"inspect", sample("gpt-oss-mxfp4"), "--json"});
  ASSERT_EQ(path.exit_code, 0) << path.err;
  auto from_path = nlohmann::json::parse(path.out), from_tag = nlohmann::json::parse(tag.out);
  from_tag.erase("hub");
  for (const char* where : {"path", "quantization_config_source"}) {  // where it was read: the snapshot
    from_tag.erase(where);
    from_path.erase(where);
  }
  EXPECT_EQ(from_tag, from_path);

  CommandResult human = run_moepack({"inspect", "org/model@v1.0"});
  ASSERT_EQ(human.exit_code, 0) << human.err;
  EXPECT_NE(human.out.find("hub cache    org/model@v1.0: commit " + kOldCommit), std::string::npos) << human.out;
}

TEST(HubCache, CacheDirectoryComesFromTheEnvironmentAsHuggingfaceHubChoosesIt) {
  TempDir dir;
  const std::string hub = make_hub_cache(dir);
  fs::create_directories(dir.file("home/huggingface"));
  fs::rename(hub, dir.file("home/huggingface/hub"));
  ScopedEnv no_cache("HF_HUB_CACHE", std::nullopt);
  ScopedEnv no_legacy("HUGGINGFACE_HUB_CACHE", std::nullopt);
  {
    ScopedEnv home("HF_HOME", dir.file("home/huggingface"));
    EXPECT_EQ(run_moepack({"inspect", "org/model"}).exit_code, 0);
  }
  {
    ScopedEnv no_home("HF_HOME", std::nullopt);
    ScopedEnv xdg("XDG_CACHE_HOME", dir.file("home"));
    EXPECT_EQ(run_moepack({"inspect", "org/model"}).exit_code, 0);
  }
  {
    ScopedEnv no_home("HF_HOME", std::nullopt);
    ScopedEnv no_xdg("XDG_CACHE_HOME", std::nullopt);
    ScopedEnv home("HOME", dir.file("home"));
    fs::create_directories(dir.file("home/.cache"));
    fs::rename(dir.file("home/huggingface"), dir.file("home/.cache/huggingface"));
    EXPECT_EQ(run_moepack({"inspect", "org/model"}).exit_code, 0);
    // HF_HUB_CACHE wins over everything else, with `~` expanded.
    ScopedEnv cache("HF_HUB_CACHE", "~/elsewhere");
    CommandResult r = run_moepack({"inspect", "org/model"});
    EXPECT_EQ(r.exit_code, 4);
    EXPECT_NE(r.err.find(dir.file("home/elsewhere/models--org--model")), std::string::npos) << r.err;
  }
}

TEST(HubCache, WhatIsNotCachedIsBadInputNamingWhereItLooked) {
  TempDir dir;
  const std::string hub = make_hub_cache(dir);
  ScopedEnv cache("HF_HUB_CACHE", hub);
  CommandResult r = run_moepack({"plan", "org/absent", "--target", "sm90", "--json"});
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_NE(r.err.find(hub + "/models--org--absent does not exist"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("never downloads"), std::string::npos) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("error").at("exit_code"), 4) << r.out;

  r = run_moepack({"inspect", "org/model@v9"});
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.err.find("not revision `v9`"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(hub + "/models--org--model/refs/v9"), std::string::npos) << r.err;

  // Two ids, neither cached: the first argument is the one named.
  r = run_moepack({"diff", "org/first", "org/second"});
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.err.find("org/first"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("org/second"), std::string::npos) << r.err;

  // A ref whose snapshot is gone (an interrupted download, a pruned cache).
  write_text(hub + "/models--org--model/refs/broken", "3333333333333333333333333333333333333333");
  r = run_moepack({"inspect", "org/model@broken"});
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.err.find("names commit 3333333333333333333333333333333333333333"), std::string::npos) << r.err;
  // A revision that would leave the model's folder is not a revision.
  r = run_moepack({"inspect", "org/model@../../models--org--model/snapshots/" + kOldCommit});
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.err.find("no such file or directory"), std::string::npos) << r.err;
  // An argument that is neither a path nor shaped like an id keeps the plain message.
  r = run_moepack({"inspect", dir.file("nowhere/at/all")});
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_EQ(r.err.find("Hugging Face"), std::string::npos) << r.err;
}

TEST(HubCache, AnExistingPathWinsOverAModelId) {
  TempDir dir;
  ScopedEnv cache("HF_HUB_CACHE", make_hub_cache(dir));
  fs::create_directories(dir.file("work/org"));
  fs::copy(sample("gpt-oss-mxfp4"), dir.file("work/org/model"));
  CommandResult r = run_moepack_in(dir.file("work"), {"inspect", "org/model", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(nlohmann::json::parse(r.out).contains("hub")) << r.out;  // main would be Mixtral
  EXPECT_EQ(family_of(r), family_of(run_moepack({"inspect", sample("gpt-oss-mxfp4"), "--json"})));
}

// The artifact of a cached revision is the artifact of the same files read from a directory:
// the snapshot's file names (never the blobs'), the same bytes, the same source hashes; the
// manifest adds the id, the revision and the commit. verify and diff take the id too.
TEST(HubCache, ConvertRecordsTheIdAndCommitAndReadsTheSymlinkedBlobs) {
  TempDir dir;
  ScopedEnv cache("HF_HUB_CACHE", make_hub_cache(dir));
  const std::string from_id = dir.file("from-id"), from_path = dir.file("from-path");
  CommandResult r = run_moepack({"convert", "org/model@v1.0", "--target", "sm90", "-o", from_id});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_moepack({"convert", sample("gpt-oss-mxfp4"), "--target", "sm90", "-o", from_path});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  auto a = all_files(from_id), b = all_files(from_path);
  auto manifest_a = nlohmann::json::parse(a.at("moepack.json")), manifest_b = nlohmann::json::parse(b.at("moepack.json"));
  a.erase("moepack.json");
  b.erase("moepack.json");
  EXPECT_EQ(a, b);
  const auto& source = manifest_a.at("source");
  EXPECT_EQ(source.at("model_id"), "org/model");
  EXPECT_EQ(source.at("revision"), "v1.0");
  EXPECT_EQ(source.at("commit"), kOldCommit);
  for (const auto& f : source.at("files")) EXPECT_EQ(f.at("name").get<std::string>().find("blobs"), std::string::npos) << f;
  manifest_a["source"].erase("model_id");
  manifest_a["source"].erase("revision");
  manifest_a["source"].erase("commit");
  EXPECT_EQ(manifest_a, manifest_b);
  EXPECT_FALSE(manifest_b.at("source").contains("model_id"));

  r = run_moepack({"verify", from_id, "--source", "org/model@v1.0"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  r = run_moepack({"diff", sample("gpt-oss-mxfp4"), "org/model@" + kOldCommit});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  r = run_moepack({"diff", "org/model@v1.0", "org/model"});
  EXPECT_EQ(r.exit_code, 5) << r.out << r.err;
}

// A model id with several devices: every artifact records the id and the resolved commit, and
// holds the bytes of a single-device conversion of the same snapshot.
TEST(HubCache, ConvertForSeveralDevicesRecordsTheIdInEveryArtifact) {
  TempDir dir;
  ScopedEnv cache("HF_HUB_CACHE", make_hub_cache(dir));
  CommandResult r = run_moepack({"convert", "org/model", "--target", "sm90,cpu-amx", "-o", dir.file("fleet")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string device : {"sm90", "cpu-amx"}) {
    r = run_moepack({"convert", "org/model", "--target", device, "-o", dir.file("alone-" + device)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto together = all_files(dir.file("fleet/" + device));
    EXPECT_EQ(together, all_files(dir.file("alone-" + device))) << device;
    const auto source = nlohmann::json::parse(together.at("moepack.json")).at("source");
    EXPECT_EQ(source.at("model_id"), "org/model");
    EXPECT_EQ(source.at("revision"), "main");
    EXPECT_EQ(source.at("commit"), kNewCommit);
  }
}

}  // namespace
}  // namespace moepack::test
