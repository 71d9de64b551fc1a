#include "core/collective/ring_schedule.h"

#include <map>

#include "gtest/gtest.h"

namespace tpuemu {
namespace {

// Blocks carried by each directed link (from, dir), halves counted as 0.5.
std::map<std::pair<int, int>, double> Load(const std::vector<Hop>& hops) {
  std::map<std::pair<int, int>, double> load;
  for (const Hop& h : hops) load[{h.from, h.dir}] += h.half ? 0.5 : 1.0;
  return load;
}

TEST(RingScheduleTest, BidirectionalAllGatherSplitsTheOppositeBlock) {
  // Seed 003's 8 chips move 8 x 4 = 32 blocks clockwise and 8 x 3 = 24 the
  // other way, in 4 steps. Sending half of the block for the opposite chip
  // each way makes it 28 and 28: 3.5 per link per direction, still 4 steps.
  auto hops = AllGatherHops(8, RingAlgorithm::kBiRing);
  EXPECT_EQ(NumSteps(hops), 4);
  double clockwise = 0, counter = 0;
  for (const auto& [link, blocks] : Load(hops)) {
    EXPECT_EQ(blocks, 3.5);
    (link.second > 0 ? clockwise : counter) += blocks;
  }
  EXPECT_EQ(clockwise, 28);
  EXPECT_EQ(counter, 28);
  // Odd rings have no opposite chip: (n-1)/2 whole blocks each way.
  for (const auto& [link, blocks] : Load(AllGatherHops(7, RingAlgorithm::kBiRing))) EXPECT_EQ(blocks, 3);
}

TEST(RingScheduleTest, EveryChipReceivesEveryOtherShardOnce) {
  for (auto alg : {RingAlgorithm::kUniRing, RingAlgorithm::kBiRing, RingAlgorithm::kLine}) {
    for (int n = 2; n <= 9; ++n) {
      std::map<std::pair<int, int>, int> got;  // (chip, block) -> 3 per whole copy
      for (const Hop& h : AllGatherHops(n, alg)) got[{h.to, h.block}] += h.half ? h.half : 3;  // halves 1 + 2
      EXPECT_EQ(static_cast<int>(got.size()), n * (n - 1)) << AlgorithmName(alg) << " n=" << n;
      for (const auto& [key, times] : got) {
        EXPECT_EQ(times, 3) << "chip " << key.first << " gets block " << key.second << " once, whole or in halves";
        EXPECT_NE(key.first, key.second);
      }
    }
  }
}

TEST(RingScheduleTest, ReduceScatterIsTheReversedTranspose) {
  auto ag = AllGatherHops(6, RingAlgorithm::kBiRing);
  auto rs = ReduceScatterHops(6, RingAlgorithm::kBiRing);
  ASSERT_EQ(ag.size(), rs.size());
  const int steps = NumSteps(ag);
  for (size_t i = 0; i < ag.size(); ++i) {
    EXPECT_EQ(rs[i].from, ag[i].to);
    EXPECT_EQ(rs[i].to, ag[i].from);
    EXPECT_EQ(rs[i].dir, -ag[i].dir);
    EXPECT_EQ(rs[i].step, steps + 1 - ag[i].step);
  }
}

TEST(RingScheduleTest, BidirectionalAllToAllLoadsEachDirectionWithAnEighth) {
  // V/8 per direction = N^2/8 blocks of V/N^2: 8 blocks at N = 8.
  for (const auto& [link, blocks] : Load(AllToAllHops(8, RingAlgorithm::kBiRing))) EXPECT_EQ(blocks, 8);
  // Unidirectional: N(N-1)/2 blocks on every clockwise link.
  for (const auto& [link, blocks] : Load(AllToAllHops(8, RingAlgorithm::kUniRing))) EXPECT_EQ(blocks, 28);
}

TEST(RingScheduleTest, RingsNeedWraparound) {
  EXPECT_FALSE(ResolveAlgorithm(RingAlgorithm::kBiRing, false, "x", "v5e:4x4").ok());
  EXPECT_EQ(*ResolveAlgorithm(RingAlgorithm::kAuto, false, "x", "v5e:4x4"), RingAlgorithm::kLine);
  EXPECT_EQ(*ResolveAlgorithm(RingAlgorithm::kAuto, true, "x", "v5p:4x4"), RingAlgorithm::kBiRing);
}

}  // namespace
}  // namespace tpuemu
