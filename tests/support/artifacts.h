// Proving a converted artifact in tests: the integrity check against its source and `verify`
// against the source's reference, with the expectations every convert test makes; and reading
// an artifact's F32 tensor back.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "formats/artifact/manifest.h"
#include "formats/checkpoints/checkpoint.h"
#include "formats/safetensors/file.h"
#include "lib/convert/executor.h"
#include "lib/convert/plan.h"
#include "lib/convert/target.h"
#include "lib/runtime/artifact_check.h"
#include "lib/runtime/verify.h"

namespace moepack::test {

// Converts the checkpoint at `source` for `target` at tensor parallelism `tp` into `out`, through
// the library (no staging directory, no CLI), with `threads` worker threads (0: the CPUs the
// process may use).
inline void convert_checkpoint(const std::string& source, const std::string& target, const std::string& out, int tp = 1, int threads = 0) {
  ckpt::Checkpoint ck = ckpt::open_checkpoint(source);
  oracle::Deployment dep = oracle::default_deployment(oracle::parse_target(target));
  dep.parallel.tp = tp;
  convert::ConvertRequest req;
  req.target_json = convert::target_json(dep);
  convert::ExecutorOptions options;
  options.threads = threads;
  std::filesystem::create_directories(out);  // the executor writes into a directory that exists
  convert::execute_plan(convert::build_conversion_plan(ck, convert::decide_layers(ck, dep), req), out, options);
}

// Every file and tensor hashes right and every expert slab unpacks to the loaded source.
inline runtime::ArtifactCheck expect_checked_against_source(const std::string& artifact, const std::string& source) {
  runtime::ArtifactCheck check = runtime::check_artifact(artifact, source);
  for (const auto& p : check.problems) ADD_FAILURE() << p;
  EXPECT_GT(check.expert_slabs_checked, 0u);
  return check;
}

// The same against a checkpoint the caller holds open (a test that changed one of its facts).
inline runtime::ArtifactCheck expect_checked_against_source(const std::string& artifact, const ckpt::Checkpoint& source) {
  runtime::ArtifactCheck check = runtime::check_artifact(artifact, source);
  for (const auto& p : check.problems) ADD_FAILURE() << p;
  EXPECT_GT(check.expert_slabs_checked, 0u);
  return check;
}

// Every layer run from the artifact matches the source's reference within its tolerance.
// `opened`: the source as the caller holds it open, instead of reading `source` again.
inline runtime::VerifyReport expect_verified_against_source(const std::string& artifact, const std::string& source, uint64_t tokens,
                                                            const ckpt::Checkpoint* opened = nullptr) {
  runtime::VerifyOptions vo;
  vo.artifact = artifact;
  vo.source = source;
  vo.source_checkpoint = opened;
  vo.tokens = tokens;
  runtime::VerifyReport v = runtime::verify_artifact(vo);
  EXPECT_TRUE(v.ok());
  for (const auto& l : v.layers) {
    EXPECT_TRUE(l.ok) << l.prefix << ": " << l.note;
    EXPECT_EQ(l.compared_with, "source");
    EXPECT_LE(l.max_rel_error, l.tolerance) << l.prefix;
  }
  return v;
}

// An artifact's F32 tensor as floats (empty, with a failure, when the file lacks it).
inline std::vector<float> read_f32_tensor(const std::string& dir, const artifact::PackedTensor& t) {
  st::File f((std::filesystem::path(dir) / t.file).string());
  const st::TensorInfo* info = f.find(t.name);
  EXPECT_NE(info, nullptr);
  if (!info) return {};
  auto bytes = f.data(*info);
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

}  // namespace moepack::test
