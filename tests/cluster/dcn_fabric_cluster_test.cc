// Jobs that share the DCN fabric contend on it (core/pod/dcn_fabric.h): on a
// pod whose fabric is oversubscribed 2:1, two multislice jobs on the two
// hosts of each slice each get half their NICs while both run, exactly as
// much slower on the emulated clock as the same job alone with its DCN links
// at 1/2, and compute the same numbers; alone, a job on half of each slice
// gets all of its NICs, and one on whole slices (training or a collective)
// half of them.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cluster/test_pod.h"
#include "tests/cluster/train_jobs.h"

namespace tpuemu {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Two slices of 2x2 chips, two workers of 2x1 in each: a 2x1 block in each
// slice is one host per slice.
const TopologyRequest kPod{"v5p:2x2", 2, 2, "auto"};
constexpr char kHalf[] = "num_slices: 2\ntopology: v5p:2x1\ndcn_data_parallelism: -1\nici_fsdp_parallelism: -1\n";

TestPodOptions Oversubscribed() {
  TestPodOptions options;
  options.dcn_oversubscription = 2;
  return options;
}

TEST(DcnFabricClusterTest, TwoMultisliceJobsOnOneOversubscribedFabricEachGetHalfTheirNics) {
  TestPod pod(kPod, 0, Oversubscribed());
  const TrainSpec half = Job(kHalf, 4);
  // Alone, a job on one host per slice fits the uplink (one host's NICs).
  const v1::Job alone = pod.Run(half);
  ExpectEqualsReference(alone, half);
  for (const v1::TrainStep& s : alone.steps()) EXPECT_EQ(s.faults_size(), 0) << "step " << s.step();
  // What half its DCN bandwidth costs it, as a fault asked for.
  const v1::Job slowed = pod.Run(Job(std::string(kHalf) + "faults:\n  - slow_link: dcn@0.5\n", 4));
  ASSERT_EQ(slowed.state(), v1::JOB_STATE_SUCCEEDED) << slowed.error();

  // A long job on the first host of each slice, then the same job again on
  // the second host of each, while the first runs.
  auto other = pod.Submit(Job(kHalf, 100000));
  ASSERT_TRUE(other.ok()) << other.status();
  pod.WaitForSteps(other->id(), 2);
  auto shared = pod.Submit(half);
  ASSERT_TRUE(shared.ok()) << shared.status();
  const v1::Job ran = pod.Wait(shared->id());
  const v1::Job other_now = pod.coordinator().GetJob(other->id()).value();
  ASSERT_EQ(other_now.state(), v1::JOB_STATE_RUNNING);  // it ran throughout
  ExpectEqualsReference(ran, half);
  EXPECT_EQ(ran.placement().origin(1), 1);  // the second host of each slice
  ASSERT_EQ(ran.steps_size(), alone.steps_size());
  for (int i = 0; i < ran.steps_size(); ++i) {
    EXPECT_EQ(ran.steps(i).loss(), alone.steps(i).loss()) << "step " << i;  // the same numbers, bit for bit
    EXPECT_EQ(ran.steps(i).emulated_step_s(), slowed.steps(i).emulated_step_s()) << "step " << i;
    EXPECT_GT(ran.steps(i).emulated_step_s(), alone.steps(i).emulated_step_s()) << "step " << i;
    ASSERT_EQ(ran.steps(i).faults_size(), 1) << "step " << i;
    EXPECT_THAT(ran.steps(i).faults(0), HasSubstr("links dcn at 1/2 bandwidth"));
    EXPECT_THAT(ran.steps(i).faults(0),
                HasSubstr("the DCN fabric of slice 0 (2:1 oversubscribed), shared with " + other->id()));
  }

  // The long job was slowed too once the second came, and only then.
  ASSERT_TRUE(pod.coordinator().CancelJob(other->id()).ok());
  const v1::Job long_job = pod.Wait(other->id());
  ASSERT_GE(long_job.steps_size(), 2);
  EXPECT_EQ(long_job.steps(0).faults_size(), 0);
  EXPECT_EQ(long_job.steps(0).emulated_step_s(), alone.steps(0).emulated_step_s());
  int shared_steps = 0;
  for (const v1::TrainStep& s : long_job.steps()) {
    if (s.faults_size() == 0) continue;
    ++shared_steps;
    EXPECT_THAT(s.faults(0), HasSubstr("shared with " + shared->id()));
  }
  EXPECT_GT(shared_steps, 0);
}

TEST(DcnFabricClusterTest, AJobOnWholeSlicesAloneGetsWhatTheOversubscribedFabricCarries) {
  const TrainSpec whole = Job("dcn_data_parallelism: -1\nici_fsdp_parallelism: -1\n", 2);
  CollectiveSpec spec;  // a collective over DCN too
  spec.op = CollectiveOp::kAllReduce;
  spec.axes = {Axis::kX, Axis::kDcn};
  spec.bytes = 1 << 20;
  // References: the same jobs with their DCN links at 1/2, on a fabric that
  // carries every NIC.
  v1::Job slowed, slowed_collective;
  {
    TestPod pod(kPod, 0);
    slowed = pod.Run(Job("dcn_data_parallelism: -1\nici_fsdp_parallelism: -1\nfaults:\n  - slow_link: dcn@0.5\n", 2));
    CollectiveSpec slow = spec;
    ASSERT_TRUE(ParseSlowLink("dcn@0.5", "--slow-link", &slow.faults.slow_links.emplace_back()).ok());
    slowed_collective = pod.Run(slow);
    ASSERT_TRUE(slowed_collective.result().correct());
  }
  TestPod pod(kPod, 0, Oversubscribed());
  const v1::Job ran = pod.Run(whole);
  ExpectEqualsReference(ran, whole);
  ASSERT_EQ(ran.steps_size(), slowed.steps_size());
  for (int i = 0; i < ran.steps_size(); ++i) {
    EXPECT_EQ(ran.steps(i).emulated_step_s(), slowed.steps(i).emulated_step_s()) << "step " << i;
    ASSERT_EQ(ran.steps(i).faults_size(), 1);
    EXPECT_THAT(ran.steps(i).faults(0), HasSubstr("the DCN fabric of slice 0 (2:1 oversubscribed)"));
    EXPECT_THAT(ran.steps(i).faults(0), Not(HasSubstr("shared with")));
  }
  const v1::Job collective = pod.Run(spec);
  ASSERT_TRUE(collective.result().correct());
  EXPECT_EQ(collective.result().emulated_s(), slowed_collective.result().emulated_s());
  ASSERT_EQ(collective.result().faults_size(), 1);
  EXPECT_THAT(collective.result().faults(0), HasSubstr("links dcn at 1/2 bandwidth"));
  EXPECT_THAT(collective.result().faults(0), HasSubstr("the DCN fabric of slice 0"));
}

TEST(DcnFabricClusterTest, AtOneToOneNoJobEverWaitsForAnother) {
  TestPod pod(kPod, 0);
  const TrainSpec half = Job(kHalf, 3);
  const v1::Job alone = pod.Run(half);
  auto other = pod.Submit(Job(kHalf, 100000));
  ASSERT_TRUE(other.ok()) << other.status();
  pod.WaitForSteps(other->id(), 1);
  const v1::Job ran = pod.Run(half);
  ASSERT_TRUE(pod.coordinator().CancelJob(other->id()).ok());
  pod.Wait(other->id());
  ASSERT_EQ(ran.steps_size(), alone.steps_size());
  for (int i = 0; i < ran.steps_size(); ++i) {
    EXPECT_EQ(ran.steps(i).emulated_step_s(), alone.steps(i).emulated_step_s()) << "step " << i;
    EXPECT_EQ(ran.steps(i).faults_size(), 0);
  }
}

}  // namespace
}  // namespace tpuemu
