#include "core/pod/topology.h"

#include "gtest/gtest.h"

namespace tpuemu {
namespace {

Topology Make(const std::string& t, int slices = 1, int cph = 4, const std::string& wrap = "auto") {
  auto topo = Topology::Create({t, slices, cph, wrap});
  EXPECT_TRUE(topo.ok()) << topo.status();
  return *topo;
}

TEST(TopologyTest, WraparoundFollowsEachChipsRule) {
  EXPECT_FALSE(Make("v5e:4x4").AxisWraps(Axis::kX));  // v5e wraps only an axis of 16
  EXPECT_TRUE(Make("v5e:16x4").AxisWraps(Axis::kX));
  EXPECT_FALSE(Make("v5e:16x4").AxisWraps(Axis::kY));
  Topology v5p = Make("v5p:4x4x4");
  for (Axis a : {Axis::kX, Axis::kY, Axis::kZ}) EXPECT_TRUE(v5p.AxisWraps(a));
  Topology v4 = Make("v4:2x4x8");
  EXPECT_FALSE(v4.AxisWraps(Axis::kX));
  EXPECT_TRUE(v4.AxisWraps(Axis::kY));
  EXPECT_TRUE(v4.AxisWraps(Axis::kZ));
  EXPECT_TRUE(Make("v5e:4x4", 1, 4, "x").AxisWraps(Axis::kX));
  EXPECT_FALSE(Make("v5p:4x4", 1, 4, "none").AxisWraps(Axis::kY));
}

TEST(TopologyTest, CountsChipsHostsAndSlices) {
  Topology t = Make("v5e:4x4", 2, 4);
  EXPECT_EQ(t.num_chips(), 32);
  EXPECT_EQ(t.num_hosts(), 8);
  EXPECT_EQ(t.AxisSize(Axis::kDcn), 2);
  EXPECT_TRUE(t.HasAxis(Axis::kDcn));
  EXPECT_FALSE(t.HasAxis(Axis::kZ));
  EXPECT_FALSE(Make("v5e:4x4").HasAxis(Axis::kDcn));
}

TEST(TopologyTest, HostsOwnContiguousBlocks) {
  Topology t = Make("v5p:2x2x2", 1, 4);
  // x fills first (2), then y (2): host 0 owns z = 0, host 1 owns z = 1.
  for (int chip : t.ChipsOfHost(0)) EXPECT_EQ(t.CoordOf(chip).xyz[2], 0);
  for (int chip : t.ChipsOfHost(1)) EXPECT_EQ(t.CoordOf(chip).xyz[2], 1);
  Topology rows = Make("v5e:8x2", 2, 4);
  EXPECT_EQ(rows.ChipsOfHost(0), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(rows.HostOf(rows.ChipId({1, {4, 1, 0}})), 4 + 3);
}

TEST(TopologyTest, NeighboursWrapOnlyWhereTheAxisWraps) {
  Topology line = Make("v5e:4x4");
  EXPECT_FALSE(line.Neighbor(0, Axis::kX, -1).has_value());
  EXPECT_EQ(*line.Neighbor(0, Axis::kX, +1), 1);
  EXPECT_EQ(*line.Neighbor(0, Axis::kY, +1), 4);
  Topology ring = Make("v5p:4x4");
  EXPECT_EQ(*ring.Neighbor(0, Axis::kX, -1), 3);
  Topology two = Make("v5e:4", 2, 4);
  EXPECT_EQ(*two.Neighbor(0, Axis::kDcn, +1), 4);
  EXPECT_FALSE(two.Neighbor(0, Axis::kDcn, -1).has_value());
}

TEST(TopologyTest, DcnBandwidthIsSharedByTheHostsChips) {
  Topology t = Make("v5p:4x4", 2, 4);
  EXPECT_DOUBLE_EQ(t.Link(Axis::kDcn).bw_dir, t.profile().dcn_bw_per_host_dir / 4);
  EXPECT_DOUBLE_EQ(t.Link(Axis::kX).bw_dir, 9e10);
}

TEST(TopologyTest, BadInputNamesFieldValueAndWhatIsAllowed) {
  auto expect_error = [](TopologyRequest req, const std::string& needle) {
    auto t = Topology::Create(req);
    ASSERT_FALSE(t.ok()) << req.topology;
    EXPECT_NE(t.status().message().find(needle), std::string::npos) << t.status();
  };
  expect_error({"v5e4x4", 1, 4, "auto"}, "expected CHIP:SHAPE");
  expect_error({"v9:4x4", 1, 4, "auto"}, "allowed: v4, v5e, v5e-measured, v5p, v6e");
  expect_error({"v5e:4x4x4", 1, 4, "auto"}, "1 to 2 dimensions");
  expect_error({"v5e:4xa", 1, 4, "auto"}, "dimension 'a'");
  expect_error({"v5e:4x4", 1, 3, "auto"}, "`chips_per_host` '3'");
  expect_error({"v5e:2x3", 1, 4, "auto"}, "`chips_per_host` '4'");
  expect_error({"v5e:4x4", 0, 4, "auto"}, "`slices` '0'");
  expect_error({"v5e:4x4", 1, 4, "z"}, "`wraparound` 'z'");
}

}  // namespace
}  // namespace tpuemu
