// The hazard table (lib/oracle/hazards): which decided layers hit a known kernel defect. Each
// case decides a real query on a real target first, so a change in the oracle's choice (another
// backend, another round-up) shows up here as a hazard appearing or vanishing.
#include <set>

#include "lib/oracle/hazards.h"
#include "tests/oracle/oracle_cases.h"

namespace moepack::oracle::test {
namespace {

const std::string kPartialKTile = "triton_kernels-3.5.1-sm90-partial-k-tile";

MoeLayerQuery gpt_oss_hidden(int hidden) {
  MoeLayerQuery q = gpt_oss();
  q.hidden_size = hidden;
  return q;
}

std::vector<Hazard> hazards_of(const MoeLayerQuery& query, const Deployment& deployment) {
  return find_hazards(decide(query, deployment), deployment);
}

TEST(Hazards, TableRowsAreComplete) {
  std::set<std::string> ids;
  for (const HazardRow& row : hazard_table()) {
    EXPECT_FALSE(row.id.empty());
    EXPECT_TRUE(ids.insert(row.id).second) << "duplicate id " << row.id;
    EXPECT_TRUE(row.applies && row.effect) << row.id;
    EXPECT_FALSE(row.seen.empty()) << row.id;
  }
  EXPECT_TRUE(ids.count(kPartialKTile));
}

// gpt-oss MXFP4 on SM90 takes TRITON / OAITritonMxfp4ExpertsMonolithic with the hidden size
// unpadded; at 352 the w13 GEMM's last K tile (320-351) is partial.
TEST(Hazards, PartialKTileOnSm90AtHidden352) {
  const Deployment sm90 = target("sm90");
  const Decision d = decide(gpt_oss_hidden(352), sm90);
  ASSERT_TRUE(d.ok()) << d.error->message;
  ASSERT_EQ(d.backend, "TRITON");
  ASSERT_EQ(d.experts_class, "OAITritonMxfp4ExpertsMonolithic");
  ASSERT_EQ(d.padded_hidden_size, 352);
  const std::vector<Hazard> hazards = find_hazards(d, sm90);
  ASSERT_EQ(hazards.size(), 1u);
  EXPECT_EQ(hazards[0].id, kPartialKTile);
  EXPECT_NE(hazards[0].effect.find("K 320-351"), std::string::npos) << hazards[0].effect;
  EXPECT_NE(hazards[0].effect.find("K = hidden 352"), std::string::npos) << hazards[0].effect;
  EXPECT_EQ(hazards[0].seen, "H200, hidden 352, moepack session measurements, 2026-11");
}

// The measured exact cases: multiples of 64.
TEST(Hazards, NoneWhenHiddenIsAMultipleOf64) {
  for (int hidden : {192, 2880}) {
    SCOPED_TRACE(hidden);
    const Decision d = decide(gpt_oss_hidden(hidden), target("sm90"));
    ASSERT_EQ(d.experts_class, "OAITritonMxfp4ExpertsMonolithic");
    EXPECT_TRUE(find_hazards(d, target("sm90")).empty());
  }
}

// Same layer elsewhere: Blackwell (the row is for SM90 only), ROCm, and SM90 with another backend.
TEST(Hazards, NoneOffSm90OrOffTheTritonBackend) {
  EXPECT_TRUE(hazards_of(gpt_oss_hidden(352), target("sm100")).empty());
  EXPECT_TRUE(hazards_of(gpt_oss_hidden(352), target("sm100", backend("triton"))).empty());
  EXPECT_TRUE(hazards_of(gpt_oss_hidden(352), target("gfx950")).empty());
  const Deployment marlin = target("sm90", backend("marlin"));
  const Decision d = decide(gpt_oss_hidden(352), marlin);
  ASSERT_EQ(d.backend, "MARLIN");
  EXPECT_TRUE(find_hazards(d, marlin).empty());
}

// A refused layer runs no kernel, so it hits no defect.
TEST(Hazards, NoneForARefusal) {
  const Deployment cpu = target("cpu-avx512");
  const Decision d = decide(gpt_oss_hidden(352), cpu);
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(find_hazards(d, cpu).empty());
}

// The condition reads the padded size: a round-up to a multiple of 64 clears the hazard, and a
// partial tile left after it is reported with the padded K.
TEST(Hazards, DecidedFromThePaddedHiddenSize) {
  const Deployment sm90 = target("sm90");
  Decision d = decide(gpt_oss_hidden(352), sm90);
  d.padded_hidden_size = 384;
  EXPECT_TRUE(find_hazards(d, sm90).empty());
  d.hidden_size = 256;
  d.padded_hidden_size = 288;
  const std::vector<Hazard> hazards = find_hazards(d, sm90);
  ASSERT_EQ(hazards.size(), 1u);
  EXPECT_NE(hazards[0].effect.find("K = hidden 288"), std::string::npos) << hazards[0].effect;
  EXPECT_NE(hazards[0].effect.find("K 256-287"), std::string::npos) << hazards[0].effect;
}

}  // namespace
}  // namespace moepack::oracle::test
