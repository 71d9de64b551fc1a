// A worker stopped mid-job (as SIGSTOP does: no heartbeats, calls to it
// hang): the job ends within 5 s of the worker being declared lost, a cancel
// ends a job within 5 s whatever its workers do, the queue waits for the
// worker and moves on once it is back, and a failed job's survivors stop
// their compute instead of finishing it.
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cluster/test_pod.h"

namespace tpuemu {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Four workers of two chips, as the issue's `cluster up --local --topology v5p:2x4 --chips-per-host 2`.
const TopologyRequest kPod{"v5p:2x4", 1, 2, "auto"};
constexpr absl::Duration kHeartbeatTimeout = absl::Milliseconds(1500);
// What the issue asks: a job ends within 5 s of a worker being declared
// lost, and within 5 s of a cancel.
constexpr double kEndBoundS = 5.0;

double UnixSeconds() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

TrainSpec Training(int steps) {
  auto spec = ParseTrainSpec("ici_fsdp_parallelism: -1\nemb_dim: 32\nmlp_dim: 64\nnum_layers: 2\n"
                             "global_batch_tokens: 64\nseed: 5\nsteps: " + std::to_string(steps) + "\n",
                             "test.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.value_or(TrainSpec{});
}

// The job once it ended, or as it was at `deadline`.
v1::Job WaitUntilEnded(Coordinator& coordinator, const std::string& id, absl::Time deadline) {
  int64_t version = -1;
  v1::Job job;
  while (absl::Now() < deadline) {
    auto next = coordinator.WaitJob(id, version, absl::Milliseconds(200));
    if (!next.ok()) break;
    job = next->first;
    version = next->second;
    if (IsTerminal(job.state())) break;
  }
  return job;
}

void WaitForFirstStep(Coordinator& coordinator, const std::string& id) {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  int64_t version = -1;
  while (absl::Now() < deadline) {
    auto next = coordinator.WaitJob(id, version, absl::Seconds(1));
    ASSERT_TRUE(next.ok()) << next.status();
    version = next->second;
    if (next->first.steps_size() > 0) return;
  }
  FAIL() << id << " ran no step in 60 s";
}

// Polls until every listed worker runs no job; false at the deadline.
bool WorkersIdle(TestPod& pod, const std::vector<int>& hosts, absl::Time deadline) {
  while (true) {
    bool idle = true;
    for (int h : hosts) idle = idle && pod.node(h).Status().running_job == 0;
    if (idle) return true;
    if (absl::Now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

TEST(StoppedWorkerTest, TheJobFailsWithinFiveSecondsOfTheLossAndTheQueuedJobRunsOnceTheWorkerIsBack) {
  TestPod pod(kPod, 0, {.heartbeat_timeout = kHeartbeatTimeout, .retention = {}});
  auto running = pod.Submit(Training(100000));
  ASSERT_TRUE(running.ok()) << running.status();
  auto queued = pod.Submit(Training(2));
  ASSERT_TRUE(queued.ok()) << queued.status();
  WaitForFirstStep(pod.coordinator(), running->id());

  pod.Stop(1);
  const double stopped_s = UnixSeconds();
  const v1::Job failed = WaitUntilEnded(pod.coordinator(), running->id(), absl::Now() + absl::Seconds(30));
  ASSERT_EQ(failed.state(), v1::JOB_STATE_FAILED) << failed.error();
  // Says what was seen of which worker.
  EXPECT_THAT(failed.error(), AllOf(HasSubstr("worker host 1"), HasSubstr("no heartbeat for")));
  // Declared lost once its heartbeats lapsed (the last came before the stop).
  EXPECT_LT(failed.finished_unix_s() - stopped_s, absl::ToDoubleSeconds(kHeartbeatTimeout) + kEndBoundS);

  // The queue waits for the worker rather than failing job after job on it.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  auto waiting = pod.coordinator().GetJob(queued->id());
  ASSERT_TRUE(waiting.ok());
  EXPECT_EQ(waiting->state(), v1::JOB_STATE_PENDING);

  // Back (SIGCONT): the next job runs, although the worker's calls of the
  // failed job, held while it was stopped, now reach it.
  pod.Resume(1);
  const v1::Job next = WaitUntilEnded(pod.coordinator(), queued->id(), absl::Now() + absl::Seconds(60));
  EXPECT_EQ(next.state(), v1::JOB_STATE_SUCCEEDED) << next.error();
}

TEST(StoppedWorkerTest, ACollectiveFailsWithinFiveSecondsOfTheLossNamingTheWorker) {
  // Paced so that the all-gather's transfers last tens of seconds of wall time.
  TestPod pod(kPod, 1e6, {.heartbeat_timeout = kHeartbeatTimeout, .retention = {}});
  CollectiveSpec spec;
  spec.axes = {Axis::kX, Axis::kY};
  spec.bytes = 8 << 20;
  auto job = pod.Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  for (absl::Time deadline = absl::Now() + absl::Seconds(60); pod.node(2).Status().running_job == 0;) {
    ASSERT_LT(absl::Now(), deadline) << "the workers never started the collective";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pod.Stop(2);
  const double stopped_s = UnixSeconds();
  const v1::Job failed = WaitUntilEnded(pod.coordinator(), job->id(), absl::Now() + absl::Seconds(30));
  ASSERT_EQ(failed.state(), v1::JOB_STATE_FAILED) << failed.error();
  EXPECT_THAT(failed.error(), HasSubstr("worker host 2"));
  EXPECT_LT(failed.finished_unix_s() - stopped_s, absl::ToDoubleSeconds(kHeartbeatTimeout) + kEndBoundS);
  pod.Resume(2);
}

TEST(StoppedWorkerTest, CancelEndsARunningJobWithinFiveSecondsWhileAWorkerIsStopped) {
  TestPod pod(kPod, 0);  // no heartbeats timed: the stopped worker is never declared lost
  auto job = pod.Submit(Training(100000));
  ASSERT_TRUE(job.ok()) << job.status();
  WaitForFirstStep(pod.coordinator(), job->id());
  pod.Stop(2);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the next step's call to it waits

  const double asked_s = UnixSeconds();
  ASSERT_TRUE(pod.coordinator().CancelJob(job->id()).ok());
  const v1::Job done = WaitUntilEnded(pod.coordinator(), job->id(), absl::Now() + absl::Seconds(30));
  ASSERT_EQ(done.state(), v1::JOB_STATE_CANCELLED) << done.error();
  EXPECT_THAT(done.error(), HasSubstr("cancelled by the user"));
  EXPECT_LT(done.finished_unix_s() - asked_s, kEndBoundS);

  pod.Resume(2);
  auto next = pod.Submit(Training(2));
  ASSERT_TRUE(next.ok()) << next.status();
  const v1::Job ran = WaitUntilEnded(pod.coordinator(), next->id(), absl::Now() + absl::Seconds(60));
  EXPECT_EQ(ran.state(), v1::JOB_STATE_SUCCEEDED) << ran.error();
}

TEST(StoppedWorkerTest, AFailedJobsSurvivorsStopComputingAndTheStoppedWorkerOnceResumed) {
  // A matmul of local multiplies only (no data moves), paced so that each
  // chip's multiply lasts a minute of wall time: every chip is still
  // computing when the job fails.
  MatmulSpec spec;
  spec.expr = "A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]";
  spec.dims = "I=512,J=512,K=512";
  auto topo = Topology::Create(kPod);
  ASSERT_TRUE(topo.ok());
  const double per_chip_flops = 2.0 * (512 / 2) * 512 * (512 / 4);
  const double bytes = spec.dtype_bytes * ((512 / 2) * 512 + 512 * (512 / 4) + (512 / 2) * (512 / 4));
  const double scale = 60.0 / RooflineSeconds(topo->profile(), per_chip_flops, bytes);
  TestPod pod(kPod, scale, {.heartbeat_timeout = kHeartbeatTimeout, .retention = {}});
  auto job = pod.Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  const std::vector<int> all = {0, 1, 2, 3}, survivors = {0, 1, 2};
  for (absl::Time deadline = absl::Now() + absl::Seconds(60);;) {
    bool computing = true;
    for (int h : all) computing = computing && pod.node(h).Status().running_job != 0;
    if (computing) break;
    ASSERT_LT(absl::Now(), deadline) << "the workers never started the matmul";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  pod.Stop(3);
  const v1::Job failed = WaitUntilEnded(pod.coordinator(), job->id(), absl::Now() + absl::Seconds(30));
  ASSERT_EQ(failed.state(), v1::JOB_STATE_FAILED) << failed.error();
  EXPECT_THAT(failed.error(), HasSubstr("worker host 3"));
  EXPECT_TRUE(WorkersIdle(pod, survivors, absl::Now() + absl::Seconds(kEndBoundS)))
      << "the survivors were still computing the failed job " << kEndBoundS << " s after it failed";
  // The stopped worker hears the abort once it runs again.
  pod.Resume(3);
  EXPECT_TRUE(WorkersIdle(pod, {3}, absl::Now() + absl::Seconds(kEndBoundS)))
      << "the resumed worker still computes the failed job";
}

}  // namespace
}  // namespace tpuemu
