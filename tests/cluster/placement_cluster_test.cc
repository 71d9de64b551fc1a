// Many jobs on one pod: jobs that ask for fewer slices than the pod has are
// placed on the lowest free ones and run at the same time as jobs on other
// slices, each exactly as it runs alone; a job waits, in queue order, until
// all its slices are free (gang scheduling); a lost worker ends only the job
// on its slices.
#include <filesystem>
#include <thread>
#include <tuple>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cluster/test_pod.h"
#include "tests/cluster/train_jobs.h"

namespace tpuemu {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

void ExpectSameRun(const v1::Job& got, const v1::Job& alone) {
  ASSERT_EQ(got.steps_size(), alone.steps_size());
  for (int i = 0; i < got.steps_size(); ++i) {
    EXPECT_EQ(got.steps(i).loss(), alone.steps(i).loss()) << "step " << i;  // bit for bit
    // Nothing shared with the other job, on the emulated clock either.
    EXPECT_EQ(got.steps(i).emulated_step_s(), alone.steps(i).emulated_step_s()) << "step " << i;
  }
  EXPECT_EQ(got.train_summary().param_l2(), alone.train_summary().param_l2());
}

TEST(PlacementClusterTest, JobsOnDisjointSlicesRunAtOnceEachAsAlone) {
  TestPod pod({"v5p:2x2", 3, 2, "auto"}, 0);  // 3 slices of 4 chips, 2 workers each
  const TrainSpec one = Job("num_slices: 1\nici_fsdp_parallelism: -1\n", 12);
  const TrainSpec two = Job("num_slices: 2\ndcn_data_parallelism: -1\nici_fsdp_parallelism: 1\nici_tensor_parallelism: -1\n", 12);
  // Alone, each goes on the lowest slices.
  const v1::Job one_alone = pod.Run(one);
  const v1::Job two_alone = pod.Run(two);
  ExpectEqualsReference(one_alone, one);
  ExpectEqualsReference(two_alone, two);
  EXPECT_EQ(one_alone.placement().first_slice(), 0);
  EXPECT_EQ(one_alone.placement().num_slices(), 1);
  EXPECT_EQ(two_alone.placement().first_slice(), 0);
  EXPECT_EQ(two_alone.placement().num_slices(), 2);

  auto first = pod.Submit(one);
  auto second = pod.Submit(two);
  ASSERT_TRUE(first.ok() && second.ok());
  const v1::Job a = pod.Wait(first->id());
  const v1::Job b = pod.Wait(second->id());
  ExpectEqualsReference(a, one);
  ExpectEqualsReference(b, two);
  EXPECT_EQ(a.placement().first_slice(), 0);
  EXPECT_EQ(b.placement().first_slice(), 1);  // slices 1-2, across DCN between workers 2-3 and 4-5
  EXPECT_EQ(b.placement().num_slices(), 2);
  // Both ran at once: each started before the other finished.
  EXPECT_LT(a.started_unix_s(), b.finished_unix_s());
  EXPECT_LT(b.started_unix_s(), a.finished_unix_s());
  ExpectSameRun(a, one_alone);
  ExpectSameRun(b, two_alone);
}

// Sub-slices: blocks of whole hosts of one slice, each like a slice of that
// shape (its links, wraparound only along an axis it spans whole), run at
// once as they would on pods of their own.
TEST(PlacementClusterTest, JobsOnBlocksOfOneSliceRunAtOnceEachAsOnASliceOfThatShape) {
  const TrainSpec fsdp = Job("topology: v5p:2x2\nici_fsdp_parallelism: -1\n", 10);
  const TrainSpec tensor = Job("topology: v5p:2x2\nici_fsdp_parallelism: 1\nici_tensor_parallelism: -1\n", 10);
  const TrainSpec eight = Job("num_chips: 8\nici_fsdp_parallelism: -1\n", 10);  // a 4x2 block: x wraps
  v1::Job fsdp_own, tensor_own, eight_own;
  {
    TestPod own({"v5p:2x2", 1, 2, "auto"}, 0);
    fsdp_own = own.Run(Job("ici_fsdp_parallelism: -1\n", 10));
    tensor_own = own.Run(Job("ici_fsdp_parallelism: 1\nici_tensor_parallelism: -1\n", 10));
  }
  {
    TestPod own({"v5p:4x2", 1, 2, "auto"}, 0);
    eight_own = own.Run(Job("ici_fsdp_parallelism: -1\n", 10));
  }
  TestPod pod({"v5p:4x4", 1, 2, "auto"}, 0);  // 8 workers of 2x1 chips
  auto a = pod.Submit(fsdp);
  auto b = pod.Submit(eight);
  auto c = pod.Submit(tensor);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status() << b.status() << c.status();
  const v1::Job ran_a = pod.Wait(a->id()), ran_b = pod.Wait(b->id()), ran_c = pod.Wait(c->id());
  ExpectEqualsReference(ran_a, fsdp);
  ExpectEqualsReference(ran_b, eight);
  ExpectEqualsReference(ran_c, tensor);
  // The first free block of each, lowest chip first: rows 0-1 on the left,
  // rows 2-3 whole (rows 1-2 overlap the first), rows 0-1 on the right.
  auto where = [](const v1::Job& j) {
    return std::vector<int>{j.placement().origin().begin(), j.placement().origin().end()};
  };
  EXPECT_EQ(where(ran_a), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(where(ran_b), (std::vector<int>{0, 2, 0}));
  EXPECT_EQ(where(ran_c), (std::vector<int>{2, 0, 0}));
  EXPECT_EQ(std::vector<int>(ran_b.placement().block().begin(), ran_b.placement().block().end()),
            (std::vector<int>{4, 2, 1}));
  for (const v1::Job* other : {&ran_b, &ran_c}) {
    EXPECT_LT(ran_a.started_unix_s(), other->finished_unix_s());
    EXPECT_LT(other->started_unix_s(), ran_a.finished_unix_s());
  }
  ExpectSameRun(ran_a, fsdp_own);
  ExpectSameRun(ran_b, eight_own);
  ExpectSameRun(ran_c, tensor_own);
}

TEST(PlacementClusterTest, AJobWaitsInQueueOrderUntilAllItsSlicesAreFree) {
  TestPod pod({"v5p:2x2", 2, 2, "auto"}, 0);
  // Larger than the pod: refused at submit, naming the key.
  auto too_big = pod.Submit(Job("num_slices: 3\n", 1));
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_big.status().message(), HasSubstr("num_slices: 3, but the pod has 2 slice(s)"));

  auto running = pod.Submit(Job("num_slices: 1\nici_fsdp_parallelism: -1\n", 100000));
  ASSERT_TRUE(running.ok()) << running.status();
  pod.WaitForSteps(running->id(), 1);
  const TrainSpec whole_spec = Job("ici_fsdp_parallelism: -1\n", 3);  // both slices
  const TrainSpec small_spec = Job("num_slices: 1\nici_fsdp_parallelism: -1\n", 3);
  auto whole = pod.Submit(whole_spec);
  auto small = pod.Submit(small_spec);
  ASSERT_TRUE(whole.ok() && small.ok());
  // The whole-pod job waits for slice 0; the small one waits behind it,
  // though slice 1 is free: nothing jumps the queue.
  auto waiting = pod.coordinator().GetJob(whole->id());
  ASSERT_TRUE(waiting.ok());
  EXPECT_EQ(waiting->state(), v1::JOB_STATE_PENDING);
  EXPECT_EQ(waiting->queue_position(), 1);
  EXPECT_THAT(waiting->waiting_for(), HasSubstr("the whole pod, while " + running->id() + " on slice 0 runs"));
  auto behind = pod.coordinator().GetJob(small->id());
  ASSERT_TRUE(behind.ok());
  EXPECT_EQ(behind->state(), v1::JOB_STATE_PENDING);
  EXPECT_EQ(behind->queue_position(), 2);
  // What it waits for is the whole-pod job ahead of it; the whole pod is that one's want, not its own.
  EXPECT_EQ(behind->waiting_for(), whole->id() + ", queued ahead of it, to start (which waits for the whole pod, "
                                   "while " + running->id() + " on slice 0 runs)");
  // Still waiting a moment later.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(pod.coordinator().GetJob(small->id())->state(), v1::JOB_STATE_PENDING);

  ASSERT_TRUE(pod.coordinator().CancelJob(running->id()).ok());
  const v1::Job ended = pod.Wait(running->id());
  const v1::Job w = pod.Wait(whole->id());
  const v1::Job s = pod.Wait(small->id());
  ExpectEqualsReference(w, whole_spec);
  ExpectEqualsReference(s, small_spec);
  EXPECT_EQ(w.placement().num_slices(), 0);  // the whole pod
  EXPECT_GE(w.started_unix_s(), ended.finished_unix_s());
  EXPECT_GE(s.started_unix_s(), w.finished_unix_s());
}

// A collective on one slice of two runs beside a training job on the other,
// exactly as on a pod of one slice.
TEST(PlacementClusterTest, ACollectiveOnOneSliceRunsBesideATrainingJobAsOnASliceOfItsOwn) {
  CollectiveSpec gather;
  gather.op = CollectiveOp::kAllGather;
  gather.axes = {Axis::kX, Axis::kY};
  gather.bytes = 1 << 20;
  v1::Job own;
  {
    TestPod one({"v5p:2x2", 1, 2, "auto"}, 0);
    own = one.Run(gather);
  }
  TestPod pod({"v5p:2x2", 2, 2, "auto"}, 0);
  auto refused = pod.Submit([&] {
    CollectiveSpec too_many = gather;
    too_many.num_slices = 3;
    return too_many;
  }());
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("`num_slices` 3: the pod has 2 slice(s)"));
  auto training = pod.Submit(Job("num_slices: 1\nici_fsdp_parallelism: -1\n", 100000));
  ASSERT_TRUE(training.ok()) << training.status();
  pod.WaitForSteps(training->id(), 1);
  gather.num_slices = 1;
  const v1::Job ran = pod.Run(gather);
  ASSERT_EQ(ran.state(), v1::JOB_STATE_SUCCEEDED) << ran.error();
  EXPECT_TRUE(ran.result().correct());
  EXPECT_EQ(ran.placement().first_slice(), 1);
  EXPECT_EQ(ran.result().emulated_s(), own.result().emulated_s());
  EXPECT_EQ(pod.coordinator().GetJob(training->id())->state(), v1::JOB_STATE_RUNNING);  // never stopped for it
  ASSERT_TRUE(pod.coordinator().CancelJob(training->id()).ok());
  pod.Wait(training->id());
}

TEST(PlacementClusterTest, AHigherPriorityGoesAheadOfQueuedJobsButNotOfRunningOnes) {
  TestPod pod({"v5p:2x2", 1, 2, "auto"}, 0);
  auto refused = pod.Submit(Job("", 1), 1001);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("`priority` 1001: must be from -1000 to 1000"));

  auto running = pod.Submit(Job("", 100000), -5);  // runs at once: nothing is queued
  ASSERT_TRUE(running.ok()) << running.status();
  pod.WaitForSteps(running->id(), 1);
  const TrainSpec spec = Job("", 2);
  auto low = pod.Submit(spec);
  auto high = pod.Submit(spec, 7);
  auto same = pod.Submit(spec, 7);
  ASSERT_TRUE(low.ok() && high.ok() && same.ok());
  // First in, first out among equals; the running job keeps running.
  EXPECT_EQ(pod.coordinator().GetJob(high->id())->queue_position(), 1);
  EXPECT_EQ(pod.coordinator().GetJob(same->id())->queue_position(), 2);
  EXPECT_EQ(pod.coordinator().GetJob(low->id())->queue_position(), 3);
  EXPECT_EQ(pod.coordinator().GetJob(high->id())->priority(), 7);
  EXPECT_EQ(pod.coordinator().GetJob(running->id())->state(), v1::JOB_STATE_RUNNING);

  ASSERT_TRUE(pod.coordinator().CancelJob(running->id()).ok());
  const v1::Job h = pod.Wait(high->id()), s = pod.Wait(same->id()), l = pod.Wait(low->id());
  ExpectEqualsReference(h, spec);
  ExpectEqualsReference(l, spec);
  EXPECT_GE(s.started_unix_s(), h.finished_unix_s());
  EXPECT_GE(l.started_unix_s(), s.finished_unix_s());
}

// Stopped, not killed: in this one-process pod a server's shutdown waits for
// its calls in flight, and gRPC's callbacks of the other workers' servers
// with it (tests/e2e kill real worker processes).
TEST(PlacementClusterTest, ALostWorkerEndsOnlyTheJobOnItsSlicesWhichRunJobsAgainOnceItIsBack) {
  TestPod pod({"v5p:2x2", 2, 2, "auto"}, 0, {.heartbeat_timeout = absl::Seconds(1), .retention = {}});
  const TrainSpec endless = Job("num_slices: 1\nici_fsdp_parallelism: -1\n", 100000);
  auto on_slice_0 = pod.Submit(endless);
  auto on_slice_1 = pod.Submit(endless);
  ASSERT_TRUE(on_slice_0.ok() && on_slice_1.ok());
  pod.WaitForSteps(on_slice_0->id(), 2);
  pod.WaitForSteps(on_slice_1->id(), 2);
  pod.Stop(2);  // slice 1's first worker: no heartbeats, its calls wait
  const absl::Time stopped = absl::Now();
  const v1::Job lost = pod.Wait(on_slice_1->id());
  EXPECT_LT(absl::Now() - stopped, absl::Seconds(5));
  EXPECT_EQ(lost.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(lost.error(), HasSubstr("host 2"));
  // The job on slice 0 goes on.
  const int steps_then = pod.coordinator().GetJob(on_slice_0->id())->steps_size();
  EXPECT_EQ(pod.WaitForSteps(on_slice_0->id(), steps_then + 3).state(), v1::JOB_STATE_RUNNING);

  // A job for one slice queues meanwhile, waiting for the lost worker's
  // slice (the other is busy); once the worker is back it runs there,
  // beside the job on slice 0.
  const TrainSpec small = Job("num_slices: 1\nici_fsdp_parallelism: -1\n", 3);
  auto next = pod.Submit(small);
  ASSERT_TRUE(next.ok()) << next.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const v1::Job waiting = *pod.coordinator().GetJob(next->id());
  EXPECT_EQ(waiting.state(), v1::JOB_STATE_PENDING);
  EXPECT_THAT(waiting.waiting_for(), HasSubstr("while " + on_slice_0->id() + " on slice 0 runs; worker host 2"));
  pod.Resume(2);
  const v1::Job done = pod.Wait(next->id());
  ExpectEqualsReference(done, small);
  EXPECT_EQ(done.placement().first_slice(), 1);
  EXPECT_EQ(pod.coordinator().GetJob(on_slice_0->id())->state(), v1::JOB_STATE_RUNNING);
  ASSERT_TRUE(pod.coordinator().CancelJob(on_slice_0->id()).ok());
  EXPECT_EQ(pod.Wait(on_slice_0->id()).state(), v1::JOB_STATE_CANCELLED);
}

TEST(PlacementClusterTest, WhileAWorkerIsLostJobsStartOnTheOtherSlices) {
  TestPod pod({"v5p:2x2", 2, 2, "auto"}, 0, {.heartbeat_timeout = absl::Seconds(1), .retention = {}});
  auto alive = [&](int host) {
    const v1::ClusterStatus status = pod.coordinator().ClusterStatus();
    for (const v1::WorkerInfo& w : status.workers()) {
      if (w.host() == host) return w.alive();
    }
    return false;
  };
  pod.Stop(3);  // slice 1's second worker
  for (const absl::Time deadline = absl::Now() + absl::Seconds(10); alive(3) && absl::Now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(alive(3));
  // A whole-pod job is taken, and waits for the worker, saying so.
  auto whole = pod.Submit(Job("ici_fsdp_parallelism: -1\n", 2));
  ASSERT_TRUE(whole.ok()) << whole.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const v1::Job waiting = *pod.coordinator().GetJob(whole->id());
  EXPECT_EQ(waiting.state(), v1::JOB_STATE_PENDING);
  EXPECT_THAT(waiting.waiting_for(), HasSubstr("the whole pod; worker host 3"));
  // A one-slice job queued behind it runs on slice 0 now: a job waiting for
  // a lost worker holds back no job that fits elsewhere.
  const TrainSpec small = Job("num_slices: 1\nici_fsdp_parallelism: -1\n", 3);
  const v1::Job done = pod.Run(small);
  ExpectEqualsReference(done, small);
  EXPECT_EQ(done.placement().first_slice(), 0);
  EXPECT_FALSE(alive(3));  // lost all along
  const v1::Job still = *pod.coordinator().GetJob(whole->id());
  EXPECT_EQ(still.state(), v1::JOB_STATE_PENDING);
  EXPECT_THAT(still.waiting_for(), HasSubstr("the whole pod; worker host 3"));
  // Back, the worker takes the whole-pod job.
  pod.Resume(3);
  EXPECT_EQ(pod.Wait(whole->id()).state(), v1::JOB_STATE_SUCCEEDED);
}

// A job opens only the links between its own chips: a one-slice job on
// slice 1 once waited 15 s for a link over DCN to a worker of slice 0 that
// had exited, failed, and had its own, live, worker counted lost.
TEST(PlacementClusterTest, AJobOnOtherSlicesNeitherWaitsForNorBlamesAWorkerThatExited) {
  TestPod pod({"v5p:2x2", 2, 2, "auto"}, 0, {.heartbeat_timeout = absl::Seconds(1), .retention = {}});
  pod.Kill(0);  // slice 0's first worker
  const auto alive = [&](int host) {
    const v1::ClusterStatus status = pod.coordinator().ClusterStatus();
    for (const v1::WorkerInfo& w : status.workers()) {
      if (w.host() == host) return w.alive();
    }
    return false;
  };
  for (const absl::Time deadline = absl::Now() + absl::Seconds(10); alive(0) && absl::Now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(alive(0));
  const TrainSpec small = Job("num_slices: 1\nici_fsdp_parallelism: -1\n", 3);
  const absl::Time start = absl::Now();
  const v1::Job done = pod.Run(small);
  ExpectEqualsReference(done, small);
  EXPECT_EQ(done.placement().first_slice(), 1);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  for (int host : {1, 2, 3}) EXPECT_TRUE(alive(host)) << "host " << host;
}

TEST(PlacementClusterTest, AResumedJobGoesBackToTheSlicesItsCheckpointIsOn) {
  TestPod pod({"v5p:2x2", 2, 2, "auto"}, 0);
  char pattern[] = "/tmp/tpuemu-placement-ckpt-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string dir = pattern;
  for (int host = 0; host < pod.num_workers(); ++host) pod.node(host).set_checkpoint_dir(dir);
  const TrainSpec spec = Job("num_slices: 1\nici_fsdp_parallelism: -1\ncheckpoint_every: 5\n", 300);
  const v1::Job whole = pod.Run(spec);
  ASSERT_EQ(whole.state(), v1::JOB_STATE_SUCCEEDED) << whole.error();

  // Slice 0 busy: the job runs on slice 1 and is cancelled after a checkpoint.
  auto blocker = pod.Submit(Job("num_slices: 1\nici_fsdp_parallelism: -1\n", 100000));
  ASSERT_TRUE(blocker.ok()) << blocker.status();
  pod.WaitForSteps(blocker->id(), 1);
  auto job = pod.Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  int64_t version = -1;
  for (v1::Job seen; seen.checkpoint_step() < 10;) {
    auto next = pod.coordinator().WaitJob(job->id(), version, absl::Seconds(5));
    ASSERT_TRUE(next.ok());
    std::tie(seen, version) = *next;
    ASSERT_NE(seen.state(), v1::JOB_STATE_SUCCEEDED) << "the job ended before it could be cancelled";
  }
  ASSERT_TRUE(pod.coordinator().CancelJob(job->id()).ok());
  EXPECT_EQ(pod.Wait(job->id()).placement().first_slice(), 1);
  // Slice 1 busy, slice 0 free: the resumed job waits for slice 1.
  auto second = pod.Submit(Job("num_slices: 1\nici_fsdp_parallelism: -1\n", 100000));
  ASSERT_TRUE(second.ok());
  pod.WaitForSteps(second->id(), 1);
  ASSERT_EQ(pod.coordinator().GetJob(second->id())->placement().first_slice(), 1);
  ASSERT_TRUE(pod.coordinator().CancelJob(blocker->id()).ok());
  pod.Wait(blocker->id());
  // Slice 0 taken again: the job does not wait for that one.
  auto third = pod.Submit(Job("num_slices: 1\nici_fsdp_parallelism: -1\n", 100000));
  ASSERT_TRUE(third.ok());
  pod.WaitForSteps(third->id(), 1);

  auto resumed = pod.coordinator().ResumeJob(job->id());
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const v1::Job waiting = *pod.coordinator().GetJob(job->id());
  EXPECT_EQ(waiting.state(), v1::JOB_STATE_PENDING);
  EXPECT_THAT(waiting.waiting_for(), HasSubstr("slice 1, where its checkpoint is"));
  EXPECT_THAT(waiting.waiting_for(), HasSubstr(second->id()));
  EXPECT_THAT(waiting.waiting_for(), Not(HasSubstr(third->id()))) << "it runs on slice 0";
  ASSERT_TRUE(pod.coordinator().CancelJob(third->id()).ok());
  ASSERT_TRUE(pod.coordinator().CancelJob(second->id()).ok());
  const v1::Job done = pod.Wait(job->id());
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.error();
  EXPECT_EQ(done.placement().first_slice(), 1);
  ASSERT_EQ(done.steps_size(), whole.steps_size());
  for (int i = 0; i < done.steps_size(); ++i) EXPECT_EQ(done.steps(i).loss(), whole.steps(i).loss()) << "step " << i;
  EXPECT_EQ(done.train_summary().param_l2(), whole.train_summary().param_l2());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tpuemu
