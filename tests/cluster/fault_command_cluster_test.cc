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

v1::AddFaultsRequest Request(const std::string& id, const std::string& slow, const std::string& straggler) {
  Faults faults;
  if (!slow.empty()) {
    EXPECT_TRUE(ParseSlowLink(slow, "--slow-link", &faults.slow_links.emplace_back()).ok());
  }
  if (!straggler.empty()) {
    EXPECT_TRUE(ParseStraggler(straggler, "--straggler", &faults.stragglers.emplace_back()).ok());
  }
  v1::AddFaultsRequest request;
  request.set_id(id);
  *request.mutable_faults() = ToProto(faults);
  return request;
}

TEST(FaultCommandClusterTest, FaultsJoinARunningJobAtOneStepOnEveryWorker) {
  TestPod pod({"v5p:8", 1, 4, "auto"}, 0);
  const v1::Job healthy = pod.Run(Parsed(kJob, "healthy.yaml"));
  ASSERT_EQ(healthy.state(), v1::JOB_STATE_SUCCEEDED) << healthy.error();
  auto submitted = pod.Submit(Parsed(kJob, "faulted.yaml"));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string id = submitted->id();
  for (int i = 0; i < 3000; ++i) {  // until it has run two steps
    auto job = pod.coordinator().GetJob(id);
    if (job.ok() && job->steps_size() >= 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
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
