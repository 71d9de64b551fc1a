// A plan made for some chips only (CollectivePlan::CreateFor) is the whole
// pod's plan filtered to the transfers those chips send or receive, in the
// same order, so every chip's program, and so its data and clocks, are the
// same whichever way it was planned.
#include <algorithm>
#include <tuple>

#include "core/collective/chip_program.h"
#include "core/collective/plan.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

auto Key(const PlannedTransfer& t) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const Range& r : t.ranges) ranges.emplace_back(r.offset, r.len);
  return std::make_tuple(t.step, t.src, t.dst, static_cast<int>(t.axis), t.dir, t.reduce, t.part, t.stage, ranges);
}

auto Key(const ChunkOp& op) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const Range& r : op.ranges) ranges.emplace_back(r.offset, r.len);
  return std::make_tuple(op.peer, static_cast<int>(op.axis), op.dir, op.tag, op.reduce, ranges, op.elements,
                         op.after_recv, op.barrier_recv);
}

struct Case {
  TopologyRequest pod;
  std::vector<Axis> axes;
};

void ExpectSameShare(const Topology& topo, const CollectivePlan& whole, const CollectiveSpec& spec,
                     const std::vector<int>& chips) {
  auto mine = CollectivePlan::CreateFor(topo, spec, chips);
  ASSERT_TRUE(mine.ok()) << mine.status();
  std::vector<decltype(Key(PlannedTransfer{}))> expected, got;
  for (const PlannedTransfer& t : whole.transfers()) {
    const bool touches = std::find(chips.begin(), chips.end(), t.src) != chips.end() ||
                         std::find(chips.begin(), chips.end(), t.dst) != chips.end();
    if (touches) expected.push_back(Key(t));
  }
  for (const PlannedTransfer& t : mine->transfers()) got.push_back(Key(t));
  EXPECT_EQ(got, expected) << OpName(spec.op) << " over " << AxesName(spec.axes) << " on " << topo.Describe();
  EXPECT_EQ(mine->num_steps(), whole.num_steps());
  EXPECT_EQ(mine->virtual_len(), whole.virtual_len());
  const uint64_t chunk = 1024;  // small, so transfers cut into several chunks
  for (int chip : chips) {
    const ChipProgram a = BuildChipProgram(whole, chip, chunk), b = BuildChipProgram(*mine, chip, chunk);
    ASSERT_EQ(a.sends.size(), b.sends.size());
    ASSERT_EQ(a.recvs.size(), b.recvs.size());
    for (size_t i = 0; i < a.sends.size(); ++i) EXPECT_EQ(Key(a.sends[i]), Key(b.sends[i])) << "send " << i;
    for (size_t i = 0; i < a.recvs.size(); ++i) EXPECT_EQ(Key(a.recvs[i]), Key(b.recvs[i])) << "recv " << i;
  }
}

TEST(CollectivePlanTest, APlanForSomeChipsIsTheWholePlanFilteredInTheSameOrder) {
  const std::vector<Case> cases = {
      {{"v5p:4x4x4", 1, 4, "auto"}, {Axis::kX, Axis::kY, Axis::kZ}},
      {{"v5p:4x4x4", 1, 4, "auto"}, {Axis::kY}},
      {{"v5p:2x4", 2, 2, "auto"}, {Axis::kDcn, Axis::kX, Axis::kY}},
      {{"v5e:4x4", 1, 4, "auto"}, {Axis::kX, Axis::kY}},  // lines
  };
  for (const Case& c : cases) {
    auto topo = Topology::Create(c.pod);
    ASSERT_TRUE(topo.ok()) << topo.status();
    for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter, CollectiveOp::kAllReduce,
                            CollectiveOp::kAllToAll}) {
      CollectiveSpec spec;
      spec.op = op;
      spec.axes = c.axes;
      spec.dtype_bytes = 4;
      uint64_t n = 1;
      for (Axis a : c.axes) n *= topo->AxisSize(a);
      spec.bytes = 4 * 2 * n * n * 3 * 64;  // splits for every op over up to three parts
      auto whole = CollectivePlan::Create(*topo, spec);
      ASSERT_TRUE(whole.ok()) << whole.status();
      ExpectSameShare(*topo, *whole, spec, {0});
      ExpectSameShare(*topo, *whole, spec, {topo->num_chips() - 1});
      ExpectSameShare(*topo, *whole, spec, topo->ChipsOfHost(1));
      ExpectSameShare(*topo, *whole, spec, {topo->num_chips() / 2 + 1, 3});  // unsorted, apart
    }
  }
}

TEST(CollectivePlanTest, APlanForNoChipsChecksTheSpecAndPlansNothing) {
  auto topo = Topology::Create({"v5p:4x4x4", 1, 4, "auto"});
  ASSERT_TRUE(topo.ok());
  CollectiveSpec spec;
  spec.op = CollectiveOp::kAllReduce;
  spec.axes = {Axis::kX, Axis::kY, Axis::kZ};
  spec.bytes = 4 * 64 * 3 * 16;
  auto none = CollectivePlan::CreateFor(*topo, spec, {});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->transfers().empty());
  EXPECT_EQ(none->num_steps(), CollectivePlan::Create(*topo, spec)->num_steps());
  spec.bytes = 4 * 63 * 16;  // does not split over the 64 chips
  EXPECT_FALSE(CollectivePlan::CreateFor(*topo, spec, {}).ok());
  spec.bytes = spec.dtype_bytes * 64 * 2;  // two elements per chip for three axis parts
  EXPECT_FALSE(CollectivePlan::CreateFor(*topo, spec, {}).ok());
}

}  // namespace
}  // namespace tpuemu
