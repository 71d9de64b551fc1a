// `tpuemu fault` over real gRPC (issue 17): faults added to a running
// training job join it at one step on every worker, from the first step not
// yet sent out; the steps before are untouched, the steps from it list the
// faults and take longer, and no loss changes by a bit. What cannot take
// faults is refused, naming why.
#include <chrono>
#include <thread>

#include "core/pod/faults.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/proto_conv.h"
#include "tests/cluster/test_pod.h"
#include "tests/cluster/train_jobs.h"

namespace tpuemu {
namespace {

using ::testing::HasSubstr;

constexpr char kJob[] =
    "ici_data_parallelism: 8\nemb_dim: 128\nmlp_dim: 512\nnum_layers: 2\nglobal_batch_tokens: 1024\nsteps: 60\n"
    "seed: 3\n";

v1::AddFaultsRequest RequestFor(const std::string& id, const Faults& faults) {
  v1::AddFaultsRequest request;
  request.set_id(id);
  *request.mutable_faults() = ToProto(faults);
  return request;
}

v1::AddFaultsRequest Request(const std::string& id, const std::string& slow, const std::string& straggler) {
  Faults faults;
  if (!slow.empty()) {
    EXPECT_TRUE(ParseSlowLink(slow, "--slow-link", &faults.slow_links.emplace_back()).ok());
  }
  if (!straggler.empty()) {
    EXPECT_TRUE(ParseStraggler(straggler, "--straggler", &faults.stragglers.emplace_back()).ok());
  }
  return RequestFor(id, faults);
}

// Waits until job `id` has run `steps` steps.
void WaitForSteps(TestPod& pod, const std::string& id, int steps) {
  for (int i = 0; i < 3000; ++i) {
    auto job = pod.coordinator().GetJob(id);
    if (job.ok() && job->steps_size() >= steps) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

v1::AddFaultsRequest DownLinkRequest(const std::string& id, const std::string& link, bool route) {
  Faults faults;
  EXPECT_TRUE(ParseDownLink(link, "--down-link", &faults.down_links.emplace_back()).ok());
  faults.route_around = route;
  return RequestFor(id, faults);
}

TEST(FaultCommandClusterTest, FaultsJoinARunningJobAtOneStepOnEveryWorker) {
  TestPod pod({"v5p:8", 1, 4, "auto"}, 0);
  const v1::Job healthy = pod.Run(Parsed(kJob, "healthy.yaml"));
  ASSERT_EQ(healthy.state(), v1::JOB_STATE_SUCCEEDED) << healthy.error();
  auto submitted = pod.Submit(Parsed(kJob, "faulted.yaml"));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string id = submitted->id();
  WaitForSteps(pod, id, 2);
  auto added = pod.coordinator().AddFaults(Request(id, "x@0.5", "3@2"));
  ASSERT_TRUE(added.ok()) << added.status();
  const int from = added->added().slow_links(0).from_step();
  EXPECT_EQ(added->added().stragglers(0).from_step(), from);
  EXPECT_THAT(added->described(0), HasSubstr(absl::StrCat("links x at 1/2 bandwidth, from step ", from)));
  const v1::Job done = pod.Wait(id);
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.error();
  std::printf("faults added while step %d or later ran: in force from step %d of %d\n", 2, from, done.steps_size());
  ASSERT_GE(from, 2);
  ASSERT_LT(from, 60) << "the job ended before the faults could join it: make its steps longer";
  ASSERT_EQ(done.steps_size(), healthy.steps_size());
  for (int i = 0; i < done.steps_size(); ++i) {
    const v1::TrainStep &s = done.steps(i), &h = healthy.steps(i);
    EXPECT_EQ(s.loss(), h.loss()) << "step " << i;  // bit for bit
    if (i < from) {
      EXPECT_EQ(s.faults_size(), 0) << "step " << i;
      EXPECT_EQ(s.emulated_step_s(), h.emulated_step_s()) << "step " << i;
    } else {
      EXPECT_EQ(s.faults_size(), 2) << "step " << i;
      EXPECT_GT(s.emulated_step_s(), h.emulated_step_s()) << "step " << i;
    }
  }
}

// A down link added to a running job that needs it fails the job, as the
// job's own failure (not its host's), saying how to go round instead; with
// route (`tpuemu fault --on-down-link route`) the job goes the other way round
// from that step, its losses equal to rounding (the one-way ring sums in
// another order); links it cannot go round are refused when added.
TEST(FaultCommandClusterTest, ADownLinkAddedToARunningJobFailsItUnlessTheCommandSaysRoute) {
  TestPod pod({"v5p:2x4", 1, 2, "y"}, 0);
  const v1::Job healthy = pod.Run(Parsed(kJob, "healthy.yaml"));
  ASSERT_EQ(healthy.state(), v1::JOB_STATE_SUCCEEDED) << healthy.error();

  auto failing = pod.Submit(Parsed(kJob, "fails.yaml"));
  ASSERT_TRUE(failing.ok()) << failing.status();
  WaitForSteps(pod, failing->id(), 2);
  ASSERT_TRUE(pod.coordinator().AddFaults(DownLinkRequest(failing->id(), "0->2 y+", false)).ok());
  const v1::Job failed = pod.Wait(failing->id());
  ASSERT_EQ(failed.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.error(), HasSubstr("the job failed on worker host"));
  EXPECT_THAT(failed.error(), HasSubstr("link 0->2 y+ down"));
  EXPECT_THAT(failed.error(), HasSubstr("--on-down-link route (bench collective, tpuemu fault)"));

  auto routed = pod.Submit(Parsed(kJob, "routes.yaml"));
  ASSERT_TRUE(routed.ok()) << routed.status();
  WaitForSteps(pod, routed->id(), 2);
  auto added = pod.coordinator().AddFaults(DownLinkRequest(routed->id(), "0->2 y+", true));
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_THAT(added->described(1), HasSubstr("go the other way round their ring"));
  // Links no ring can go round are refused when added, not found at their
  // step with the job failing there (they were taken, and the reply said
  // "go the other way round"): the way back down too, or a line's link.
  auto both_ways = pod.coordinator().AddFaults(DownLinkRequest(routed->id(), "2->0 y-", true));
  ASSERT_FALSE(both_ways.ok());
  EXPECT_EQ(both_ways.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(both_ways.status().message(), HasSubstr("gradient all-reduce over data cannot run"));
  EXPECT_THAT(both_ways.status().message(), HasSubstr("links are down both ways along y"));
  auto on_a_line = pod.coordinator().AddFaults(DownLinkRequest(routed->id(), "0->1 x+", true));
  ASSERT_FALSE(on_a_line.ok());
  EXPECT_THAT(on_a_line.status().message(), HasSubstr("the axis does not wrap"));
  const int from = added->added().down_links(0).from_step();
  const v1::Job done = pod.Wait(routed->id());
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.error();
  ASSERT_LT(from, 60) << "the job ended before the down link could join it: make its steps longer";
  ASSERT_EQ(done.steps_size(), healthy.steps_size());
  for (int i = 0; i < done.steps_size(); ++i) {
    if (i < from) {
      EXPECT_EQ(done.steps(i).loss(), healthy.steps(i).loss()) << "step " << i;
      continue;
    }
    EXPECT_NEAR(done.steps(i).loss(), healthy.steps(i).loss(), 1e-6 * healthy.steps(i).loss()) << "step " << i;
    EXPECT_GT(done.steps(i).emulated_step_s(), healthy.steps(i).emulated_step_s()) << "step " << i;
  }
}

TEST(FaultCommandClusterTest, WhatCannotTakeFaultsIsRefusedNamingWhy) {
  TestPod pod({"v5p:8", 1, 4, "auto"}, 0);
  CollectiveSpec spec;
  spec.axes = {Axis::kX};
  spec.bytes = 1 << 20;
  const v1::Job collective = pod.Run(spec);
  auto finished = pod.coordinator().AddFaults(Request(collective.id(), "x@0.5", ""));
  ASSERT_FALSE(finished.ok());
  EXPECT_THAT(std::string(finished.status().message()), HasSubstr("is a collective job, succeeded: faults join a running training job"));
  EXPECT_EQ(pod.coordinator().AddFaults(Request("job-99", "x@0.5", "")).status().code(), absl::StatusCode::kNotFound);
  auto none = pod.coordinator().AddFaults(Request(collective.id(), "", ""));
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("faults: none given"));

  auto running = pod.Submit(Parsed(kJob, "running.yaml"));
  ASSERT_TRUE(running.ok());
  for (int i = 0; i < 3000 && pod.coordinator().GetJob(running->id())->state() != v1::JOB_STATE_RUNNING; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  auto bad_chip = pod.coordinator().AddFaults(Request(running->id(), "", "99@2"));
  ASSERT_FALSE(bad_chip.ok());
  EXPECT_THAT(std::string(bad_chip.status().message()), HasSubstr("straggler 1 chip '99': a chip of this pod, 0 to 7"));
  ASSERT_TRUE(pod.coordinator().CancelJob(running->id()).ok());
}

}  // namespace
}  // namespace tpuemu
