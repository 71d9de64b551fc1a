// Liveness over real gRPC (coordinator/liveness.h): a worker whose
// heartbeats stop but which answers the coordinator is slow, not lost, and
// its pod keeps running jobs; one whose connection closes (its process
// exited) is lost at once, long before any heartbeat timeout.
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cluster/test_pod.h"

namespace tpuemu {
namespace {

using ::testing::HasSubstr;

const TopologyRequest kPod{"v5p:2x4", 1, 2, "auto"};

TrainSpec Training(int steps) {
  auto spec = ParseTrainSpec("ici_data_parallelism: -1\nici_fsdp_parallelism: 1\nemb_dim: 32\nmlp_dim: 64\nnum_layers: 2\n"
                             "global_batch_tokens: 64\nseed: 5\nsteps: " + std::to_string(steps) + "\n",
                             "test.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.value_or(TrainSpec{});
}

const v1::WorkerInfo* Info(const v1::ClusterStatus& status, int host) {
  for (const v1::WorkerInfo& w : status.workers()) {
    if (w.host() == host) return &w;
  }
  return nullptr;
}

TEST(LivenessClusterTest, AWorkerWithoutHeartbeatsThatAnswersIsSlowAndItsPodRunsJobs) {
  const absl::Duration timeout = absl::Milliseconds(1500);
  TestPod pod(kPod, 0, {.heartbeat_timeout = timeout, .retention = {}});
  pod.MuteHeartbeats(1);
  std::this_thread::sleep_for(absl::ToChronoNanoseconds(3 * timeout));
  const v1::ClusterStatus status = pod.coordinator().ClusterStatus();
  const v1::WorkerInfo* w = Info(status, 1);
  ASSERT_NE(w, nullptr);
  EXPECT_GT(w->seconds_since_heartbeat(), absl::ToDoubleSeconds(2 * timeout));
  EXPECT_TRUE(w->alive());
  EXPECT_TRUE(w->slow());
  EXPECT_FALSE(Info(status, 0)->slow());
  EXPECT_TRUE(status.ready());
  EXPECT_DOUBLE_EQ(status.heartbeat_timeout_s(), 1.5);
  // A job of several timeouts' length runs to its end.
  const absl::Time start = absl::Now();
  const v1::Job job = pod.Run(Training(3));
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error();
  EXPECT_TRUE(Info(pod.coordinator().ClusterStatus(), 1)->slow())
      << "slow after the job too (" << absl::Now() - start << ")";
}

TEST(LivenessClusterTest, AWorkerWhoseConnectionClosesIsLostAtOnce) {
  // Heartbeats alone would take a minute to notice.
  TestPod pod(kPod, 0, {.heartbeat_timeout = absl::Seconds(60), .retention = {}});
  pod.Run(Training(1));  // the coordinator's connections to every worker are up
  pod.Kill(2);
  const absl::Time killed = absl::Now();
  v1::ClusterStatus status;  // holds what w points at
  const v1::WorkerInfo* w = nullptr;
  while (absl::Now() - killed < absl::Seconds(10)) {
    status = pod.coordinator().ClusterStatus();
    w = Info(status, 2);
    if (w != nullptr && !w->alive()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const absl::Duration took = absl::Now() - killed;
  ASSERT_NE(w, nullptr);
  EXPECT_FALSE(w->alive());
  EXPECT_LT(took, absl::Seconds(2));
  // A job submitted now waits for the lost worker's hosts, saying so; the
  // reason the worker was lost is the connection, not its heartbeats.
  auto waiting = pod.Submit(Training(1));
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const v1::Job queued = *pod.coordinator().GetJob(waiting->id());
  EXPECT_EQ(queued.state(), v1::JOB_STATE_PENDING);
  EXPECT_THAT(queued.waiting_for(), HasSubstr("the whole pod; worker host 2"));
  EXPECT_THAT(queued.waiting_for(), HasSubstr("was lost: the connection to it was reset or closed"));
  EXPECT_THAT(queued.waiting_for(), HasSubstr("and its hosts wait for it"));
  ASSERT_TRUE(pod.coordinator().CancelJob(waiting->id()).ok());
}

}  // namespace
}  // namespace tpuemu
