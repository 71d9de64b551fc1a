#include "core/collective_data.h"

#include <memory>

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

}  // namespace
}  // namespace tpuemu
