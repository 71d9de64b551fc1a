#include "core/collective/data.h"

#include <memory>

#include "core/base/splitmix.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

CollectivePlan Plan(CollectiveOp op) {
  auto topo = Topology::Create({"v5p:4", 1, 1, "x"});
  CollectiveSpec spec;
  spec.op = op;
  spec.axes = {Axis::kX};
  spec.bytes = 4096;
  auto plan = CollectivePlan::Create(*topo, spec);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *plan;
}

TEST(CollectiveDataTest, AnUnreducedBufferIsCaughtAndTheTrueSumPasses) {
  CollectivePlan plan = Plan(CollectiveOp::kAllReduce);
  const uint64_t v = plan.virtual_len();
  std::unique_ptr<float[]> mine(new float[v]), sum(new float[v]), other(new float[v]);
  FillCollectiveInput(plan, 0, mine.get());
  EXPECT_EQ(CountCollectiveMismatches(plan, 0, mine.get()), v) << "no element of one input is the sum";
  for (uint64_t j = 0; j < v; ++j) sum[j] = 0;
  for (int chip = 0; chip < 4; ++chip) {
    FillCollectiveInput(plan, chip, other.get());
    for (uint64_t j = 0; j < v; ++j) sum[j] += other[j];
  }
  EXPECT_EQ(CountCollectiveMismatches(plan, 0, sum.get()), 0u);
  sum[17] += 1;
  EXPECT_EQ(CountCollectiveMismatches(plan, 0, sum.get()), 1u);
}

TEST(CollectiveDataTest, AGatherWithTwoShardsSwappedIsCaught) {
  CollectivePlan plan = Plan(CollectiveOp::kAllGather);
  const uint64_t v = plan.virtual_len(), shard = v / 4;
  std::unique_ptr<float[]> buf(new float[v]);
  for (int chip = 0; chip < 4; ++chip) FillCollectiveInput(plan, chip, buf.get());
  EXPECT_EQ(CountCollectiveMismatches(plan, 0, buf.get()), 0u);
  for (uint64_t i = 0; i < shard; ++i) std::swap(buf[i], buf[shard + i]);
  EXPECT_GT(CountCollectiveMismatches(plan, 0, buf.get()), shard / 2);
}

// The inputs written down once more, element by element, in 64-bit integer
// arithmetic: whichever vector instructions the fill runs on, it must write
// exactly these values (runs stay reproducible across machines and builds).
TEST(CollectiveDataTest, InputsAreTheDocumentedFormulaOnEveryElement) {
  for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kAllReduce}) {
    CollectivePlan plan = Plan(op);
    const uint64_t seed = plan.spec().seed, v = plan.virtual_len();
    std::unique_ptr<float[]> buf(new float[v]);
    for (int chip = 0; chip < 4; ++chip) {
      FillCollectiveInput(plan, chip, buf.get());
      const int m = plan.GroupRank(chip);
      const float w = static_cast<float>(1 + SplitMix64(seed + 7919 * (m + 1)) % 3);
      const float h = static_cast<float>(static_cast<int>(SplitMix64(~seed + 104729 * (m + 1)) % 17) - 8);
      for (const Range& r : plan.InputRanges(chip)) {
        for (uint64_t j = r.offset; j < r.end(); ++j) {
          uint32_t x = static_cast<uint32_t>(j * 0x9e3779b1u) ^ static_cast<uint32_t>(seed * 0x85ebca6bu);
          x ^= x >> 15;
          x *= 0x2c1b3c6du;
          x ^= x >> 12;
          const float g = static_cast<float>(static_cast<int>(x % 17u) - 8);
          ASSERT_EQ(buf[j], g * w + h) << OpName(op) << " chip " << chip << " element " << j;
        }
      }
    }
  }
}

// The check runs in vector-wide steps plus a tail: a wrong element is found
// wherever it sits.
TEST(CollectiveDataTest, AWrongElementIsCaughtAtEveryPosition) {
  CollectivePlan plan = Plan(CollectiveOp::kAllGather);
  const uint64_t v = plan.virtual_len();
  std::unique_ptr<float[]> buf(new float[v]);
  for (int chip = 0; chip < 4; ++chip) FillCollectiveInput(plan, chip, buf.get());
  for (uint64_t j = 0; j < v; ++j) {
    buf[j] += 0.5f;
    ASSERT_EQ(CountCollectiveMismatches(plan, 0, buf.get()), 1u) << "element " << j;
    buf[j] -= 0.5f;
  }
}

}  // namespace
}  // namespace tpuemu
