// Placements on part of a pod (core/pod/placement.h) and the part a
// training job asks for (core/train/pod_part.h).
#include "core/pod/placement.h"

#include "core/train/pod_part.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

using ::testing::HasSubstr;

Topology Pod(const std::string& topology, int slices, int chips_per_host) {
  TopologyRequest request;
  request.topology = topology;
  request.slices = slices;
  request.chips_per_host = chips_per_host;
  return *Topology::Create(request);
}

TEST(PlacedTopologyTest, WholeSlicesKeepTheSliceAndItsWraparound) {
  const Topology pod = Pod("v5p:4x4", 3, 4);
  auto placed = PlacedTopology(pod, PodPart{2, {0, 0, 0}});
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(placed->request().topology, "v5p:4x4");
  EXPECT_EQ(placed->slices(), 2);
  EXPECT_TRUE(placed->AxisWraps(Axis::kX));
  EXPECT_FALSE(PlacedTopology(pod, PodPart{4, {0, 0, 0}}).ok());
}

TEST(PlacedTopologyTest, ABlockWrapsOnlyAlongAnAxisItSpansWhole) {
  const Topology pod = Pod("v5p:4x4", 1, 2);  // hosts of 2x1 chips
  auto small = PlacedTopology(pod, PodPart{0, {2, 2, 1}});
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->request().topology, "v5p:2x2");
  EXPECT_FALSE(small->AxisWraps(Axis::kX));
  EXPECT_FALSE(small->AxisWraps(Axis::kY));
  EXPECT_EQ(small->num_hosts(), 2);
  auto wide = PlacedTopology(pod, PodPart{0, {4, 2, 1}});
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_TRUE(wide->AxisWraps(Axis::kX));
  EXPECT_FALSE(wide->AxisWraps(Axis::kY));
  // A 4x4 slice of its own would wrap; a 4x4 block of an 8x8 slice cannot.
  auto inner = PlacedTopology(Pod("v5p:8x8", 1, 4), PodPart{0, {4, 4, 1}});
  ASSERT_TRUE(inner.ok()) << inner.status();
  EXPECT_FALSE(inner->AxisWraps(Axis::kX));
  EXPECT_FALSE(inner->AxisWraps(Axis::kY));
}

TEST(PlacedTopologyTest, ABlockThatCutsAHostIsRefusedNamingTheBlocksThatFit) {
  const Topology pod = Pod("v5p:4x4", 1, 4);  // hosts of 4x1 chips
  auto cut = PlacedTopology(pod, PodPart{0, {2, 2, 1}});
  ASSERT_FALSE(cut.ok());
  EXPECT_THAT(std::string(cut.status().message()), HasSubstr("a 2x2 block"));
  EXPECT_THAT(std::string(cut.status().message()), HasSubstr("each host holds a 4x1 block"));
  EXPECT_THAT(std::string(cut.status().message()), HasSubstr("4x1, 4x2, 4x4"));
  EXPECT_FALSE(PlacedTopology(pod, PodPart{0, {4, 8, 1}}).ok());  // larger than the slice
}

TEST(CandidatePlacementsTest, LowestSliceThenLowestChipFirstInStepsOfWholeHosts) {
  const Topology pod = Pod("v5p:4x4", 2, 2);
  const std::vector<Placement> all = CandidatePlacements(pod, PodPart{1, {2, 2, 1}});
  ASSERT_EQ(all.size(), 12u);  // per slice: x at 0 or 2, y at 0, 1 or 2
  EXPECT_EQ(all[0], (Placement{0, 1, {0, 0, 0}, {2, 2, 1}}));
  EXPECT_EQ(all[1], (Placement{0, 1, {2, 0, 0}, {2, 2, 1}}));
  EXPECT_EQ(all[2], (Placement{0, 1, {0, 1, 0}, {2, 2, 1}}));
  EXPECT_EQ(all[6], (Placement{1, 1, {0, 0, 0}, {2, 2, 1}}));
  EXPECT_EQ(CandidatePlacements(pod, PodPart{}), std::vector<Placement>{Placement{}});
  EXPECT_EQ(CandidatePlacements(pod, PodPart{1, {0, 0, 0}}).size(), 2u);
}

// Every placement's chips sit on the pod's hosts PlacedHosts names, and its
// ICI links are the pod's links: a job on a block runs on the links real
// chips there would use.
TEST(PlacedChipsTest, HostsAndLinksAreThePodsOwn) {
  for (const auto& [topology, slices, per_host, part] :
       std::vector<std::tuple<std::string, int, int, PodPart>>{{"v5p:4x4", 2, 2, {1, {2, 2, 1}}},
                                                              {"v5p:4x4x4", 2, 4, {2, {4, 2, 2}}},
                                                              {"v5e:4x4", 3, 4, {2, {0, 0, 0}}},
                                                              {"v5e:8x4", 1, 4, {0, {4, 2, 1}}}}) {
    const Topology pod = Pod(topology, slices, per_host);
    auto placed = PlacedTopology(pod, part);
    ASSERT_TRUE(placed.ok()) << placed.status();
    for (const Placement& p : CandidatePlacements(pod, part)) {
      SCOPED_TRACE(topology + " on " + DescribePlacement(p));
      const std::vector<int> chips = PlacedChips(pod, p), hosts = PlacedHosts(pod, p);
      ASSERT_EQ(static_cast<int>(chips.size()), placed->num_chips());
      ASSERT_EQ(static_cast<int>(hosts.size()), placed->num_hosts());
      for (int h = 0; h < placed->num_hosts(); ++h) {
        for (int c : placed->ChipsOfHost(h)) EXPECT_EQ(pod.HostOf(chips[c]), hosts[h]);
      }
      for (int c = 0; c < placed->num_chips(); ++c) {
        for (const Topology::OutgoingLink& link : placed->OutgoingLinks(c)) {
          if (link.axis == Axis::kDcn) continue;  // a job's own ring of its slices
          EXPECT_EQ(pod.Neighbor(chips[c], link.axis, link.dir), chips[link.peer]);
        }
      }
    }
  }
}

TEST(DescribePlacementTest, SaysWhereForPeople) {
  EXPECT_EQ(DescribePlacement(Placement{}), "the whole pod");
  EXPECT_EQ(DescribePlacement(Placement{1, 1}), "slice 1");
  EXPECT_EQ(DescribePlacement(Placement{0, 2}), "slices 0-1");
  EXPECT_EQ(DescribePlacement(Placement{1, 1, {2, 0, 0}, {2, 2, 1}}), "the 2x2 block at (2,0) of slice 1");
  EXPECT_EQ(DescribePlacement(Placement{0, 2, {0, 2, 2}, {4, 2, 2}}), "the 4x2x2 block at (0,2,2) of slices 0-1");
}

TrainConfig Job(const std::string& topology, int num_slices, int num_chips) {
  TrainConfig c;
  c.name = "job";
  c.topology = topology;
  c.num_slices = num_slices;
  c.num_chips = num_chips;
  return c;
}

TEST(TrainPodPartTest, TopologyNumSlicesAndNumChipsName) {
  const Topology pod = Pod("v5p:4x4", 2, 2);
  EXPECT_EQ(*TrainPodPart(Job("", 0, 0), pod), PodPart{});
  EXPECT_EQ(*TrainPodPart(Job("v5p:4x4", 2, 0), pod), PodPart{});
  EXPECT_EQ(*TrainPodPart(Job("", 1, 0), pod), (PodPart{1, {0, 0, 0}}));
  EXPECT_EQ(*TrainPodPart(Job("v5p:2x2", 1, 0), pod), (PodPart{1, {2, 2, 1}}));
  EXPECT_EQ(*TrainPodPart(Job("v5p:2x2", 0, 0), pod), (PodPart{0, {2, 2, 1}}));  // a block of every slice
  EXPECT_EQ(*TrainPodPart(Job("", 0, 8), pod), (PodPart{1, {4, 2, 1}}));        // widest along x first
  EXPECT_EQ(*TrainPodPart(Job("", 0, 16), pod), (PodPart{1, {0, 0, 0}}));
  EXPECT_EQ(*TrainPodPart(Job("", 0, 32), pod), PodPart{});
  EXPECT_EQ(*TrainPodPart(Job("", 2, 8), pod), (PodPart{0, {4, 1, 1}}));
  EXPECT_EQ(*TrainPodPart(Job("v5p:2x2", 1, 4), pod), (PodPart{1, {2, 2, 1}}));
}

TEST(TrainPodPartTest, WhatDoesNotFitIsRefusedNamingTheKey) {
  const Topology pod = Pod("v5p:4x4", 2, 4);
  auto message = [&](const TrainConfig& c) { return std::string(TrainPodPart(c, pod).status().message()); };
  EXPECT_THAT(message(Job("v5p:2x2", 1, 0)), HasSubstr("job: topology: v5p:2x2: a 2x2 block"));
  EXPECT_THAT(message(Job("v5e:4x4", 0, 0)), HasSubstr("job: topology: v5e:4x4: the pod is v5p:4x4"));
  EXPECT_THAT(message(Job("v5p:4x4x1", 0, 0)), HasSubstr("the pod's slices have 2 dimension(s)"));
  EXPECT_THAT(message(Job("", 3, 0)), HasSubstr("job: num_slices: 3, but the pod has 2 slice(s)"));
  EXPECT_THAT(message(Job("", 0, 6)), HasSubstr("job: num_chips: 6: no block of whole hosts"));
  EXPECT_THAT(message(Job("", 0, 40)), HasSubstr("job: num_chips: 40, but the pod has 32 chips"));
  EXPECT_THAT(message(Job("", 2, 12)), HasSubstr("job: num_chips: 12: no block of whole hosts"));
  EXPECT_THAT(message(Job("", 2, 9)), HasSubstr("job: num_chips: 9 does not split evenly over 2 slice(s)"));
  EXPECT_THAT(message(Job("v5p:4x2", 1, 4)), HasSubstr("job: num_chips: 4, but topology v5p:4x2 on 1 slice(s) has 8"));
}

}  // namespace
}  // namespace tpuemu
