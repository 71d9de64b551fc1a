// The DCN fabric's shares (core/pod/dcn_fabric.h): who shares a slice's
// uplink, how much each gets, and how a steady share is kept as one fault.
#include "core/pod/dcn_fabric.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Three slices of 2x2 chips, two hosts of 2x1 in each.
Topology Pod() { return Topology::Create({"v5p:2x2", 3, 2, "auto"}).value(); }

// One host per slice: the first (row 0) or the second (row 1) of each.
PlacedJob OnHost(const std::string& id, int first_slice, int num_slices, int row) {
  return {id, {first_slice, num_slices, {0, row, 0}, {2, 1, 1}}};
}

TEST(DcnFabricTest, AtOneToOneNobodyIsSlowed) {
  const DcnFabric fabric(Pod(), 1);
  const PlacedJob a = OnHost("a", 0, 2, 0), b = OnHost("b", 0, 2, 1);
  EXPECT_FALSE(fabric.ShareAt(a, {a, b}, 0));
  EXPECT_FALSE(fabric.ShareAt({"whole", {0, 0, {0, 0, 0}, {0, 0, 0}}}, {}, 0));
}

TEST(DcnFabricTest, JobsOnOneHostPerSliceFitAloneAndHalveEachOtherAtTwoToOne) {
  const DcnFabric fabric(Pod(), 2);
  const PlacedJob a = OnHost("a", 0, 2, 0), b = OnHost("b", 0, 2, 1);
  EXPECT_FALSE(fabric.ShareAt(a, {a}, 0));  // one host's NICs: what the uplink carries
  auto share = fabric.ShareAt(a, {a, b}, 7);
  ASSERT_TRUE(share);
  EXPECT_EQ(share->axis, Axis::kDcn);
  EXPECT_EQ(share->dir, 0);
  EXPECT_EQ(share->src, -1);
  EXPECT_EQ(share->bandwidth, 0.5);
  EXPECT_EQ(share->when, (StepWindow{7, 8}));
  EXPECT_EQ(share->cause, "the DCN fabric of slice 0 (2:1 oversubscribed), shared with b");
  EXPECT_EQ(share->Describe(), "links dcn at 1/2 bandwidth: " + share->cause);
}

TEST(DcnFabricTest, AJobOnWholeSlicesAloneGetsOneOverR) {
  const DcnFabric fabric(Pod(), 4);
  const PlacedJob whole{"w", {0, 2, {0, 0, 0}, {0, 0, 0}}};
  auto share = fabric.ShareAt(whole, {whole}, 0);
  ASSERT_TRUE(share);
  EXPECT_EQ(share->bandwidth, 0.25);
  EXPECT_EQ(share->cause, "the DCN fabric of slice 0 (4:1 oversubscribed)");
}

TEST(DcnFabricTest, OnlyMultisliceJobsOnTheSameSlicesShareAndTheMostCrowdedSliceDecides) {
  const DcnFabric fabric(Pod(), 3);  // an uplink carries 2/3 of a host's NICs
  const PlacedJob x = OnHost("x", 0, 2, 0);  // slices 0-1
  const PlacedJob y = OnHost("y", 1, 2, 1);  // slices 1-2: meets x on slice 1
  const PlacedJob single{"s", {0, 1, {0, 1, 0}, {2, 1, 1}}};  // slice 0 only: no DCN traffic
  auto alone = fabric.ShareAt(x, {x, single}, 0);
  ASSERT_TRUE(alone);
  EXPECT_DOUBLE_EQ(alone->bandwidth, 2.0 / 3);
  EXPECT_THAT(alone->cause, Not(HasSubstr("shared")));
  EXPECT_FALSE(fabric.ShareAt(single, {x, single}, 0));
  auto both = fabric.ShareAt(x, {x, y, single}, 0);
  ASSERT_TRUE(both);
  EXPECT_DOUBLE_EQ(both->bandwidth, 1.0 / 3);
  EXPECT_EQ(both->cause, "the DCN fabric of slice 1 (3:1 oversubscribed), shared with y");
}

TEST(DcnFabricTest, ASteadyShareIsOneFaultOverItsSteps) {
  const DcnFabric fabric(Pod(), 2);
  const PlacedJob a = OnHost("a", 0, 2, 0), b = OnHost("b", 0, 2, 1);
  Faults faults;
  AddDcnShare(faults, 0, fabric.ShareAt(a, {a}, 0));  // none
  for (int step = 1; step < 4; ++step) AddDcnShare(faults, step, fabric.ShareAt(a, {a, b}, step));
  ASSERT_EQ(faults.slow_links.size(), 1u);
  EXPECT_EQ(faults.slow_links[0].when, (StepWindow{1, 4}));
  AddDcnShare(faults, 4, fabric.ShareAt(a, {a}, 4));  // b ended
  AddDcnShare(faults, 5, fabric.ShareAt(a, {a, b}, 5));  // b again: a new window
  ASSERT_EQ(faults.slow_links.size(), 2u);
  EXPECT_EQ(faults.slow_links[1].when, (StepWindow{5, 6}));
  EXPECT_EQ(faults.Link({10, 1e-6}, 0, 4, Axis::kDcn, +1, 2).bw_dir, 5);
  EXPECT_EQ(faults.Link({10, 1e-6}, 0, 4, Axis::kDcn, +1, 4).bw_dir, 10);
}

TEST(DcnFabricTest, AnOversubscriptionOutsideOneToAThousandIsRefusedNamingTheFlag) {
  EXPECT_TRUE(CheckDcnOversubscription(1, "--dcn-oversubscription").ok());
  EXPECT_TRUE(CheckDcnOversubscription(1000, "--dcn-oversubscription").ok());
  for (double bad : {0.5, 0.0, -2.0, std::nan(""), 1000.5, std::numeric_limits<double>::infinity()}) {
    const absl::Status s = CheckDcnOversubscription(bad, "--dcn-oversubscription");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr("--dcn-oversubscription"));
    EXPECT_THAT(s.message(), HasSubstr("must be from 1 to 1000"));
  }
}

}  // namespace
}  // namespace tpuemu
