// A chip's program runs on in the thread that brings the frame it waits for
// (a worker's peer queue), and goes back to the chip's thread for whatever may
// block. Over a fabric that delivers every frame from one such thread, and
// says a frame has left only after delivering it (so links fill up while that
// thread runs chips), every collective and a training job must give exactly
// what the in-memory pod gives: results, emulated times, link bytes, losses.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "core/collective/executor.h"
#include "core/collective/report.h"
#include "core/collective/start_barrier.h"
#include "core/job/inprocess_pod.h"
#include "core/job/kinds.h"
#include "core/train/host.h"
#include "core/train/job.h"
#include "core/train/report.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

// Delivers frames in the order they were sent, or newest first (far out of
// program order, which must change nothing).
class QueueThreadFabric : public Fabric {
 public:
  explicit QueueThreadFabric(bool newest_first = false) : newest_first_(newest_first), thread_([this] { Run(); }) {}
  ~QueueThreadFabric() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void set_mailbox(Mailbox* mailbox) { mailbox_ = mailbox; }

  void Send(Frame&& frame, SentFn sent) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (std::this_thread::get_id() == thread_.get_id()) ++sent_from_queue_thread_;
    queue_.push_back({std::move(frame), std::move(sent)});
    cv_.notify_all();
  }
  absl::Status Deliver(Frame&& frame) override { return SendAndWait(std::move(frame)); }

  // Frames a chip's program sent while it ran in the delivering thread.
  int sent_from_queue_thread() {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_from_queue_thread_;
  }

 private:
  struct Queued {
    Frame frame;
    SentFn sent;
  };
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      Queued q = std::move(newest_first_ ? queue_.back() : queue_.front());
      newest_first_ ? queue_.pop_back() : queue_.pop_front();
      lock.unlock();
      mailbox_->Put(std::move(q.frame), /*may_run=*/true);
      q.sent(absl::OkStatus());
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Queued> queue_;
  bool stop_ = false;
  int sent_from_queue_thread_ = 0;
  const bool newest_first_;
  Mailbox* mailbox_ = nullptr;
  std::thread thread_;  // last: starts once the rest is made
};

// The pod's chips on one host whose frames all arrive through QueueThreadFabric.
struct QueuedPod {
  explicit QueuedPod(const Topology& topo, bool newest_first = false) : fabric(newest_first) {
    std::vector<int> chips(topo.num_chips());
    for (int i = 0; i < topo.num_chips(); ++i) chips[i] = i;
    net = std::make_unique<HostNetwork>(topo, chips, 0, &fabric);
    fabric.set_mailbox(&net->mailbox());
  }
  QueueThreadFabric fabric;
  std::unique_ptr<HostNetwork> net;
};

Topology Ring8() {
  auto topo = Topology::Create({"v5p:8", 1, 1, "x"});
  EXPECT_TRUE(topo.ok()) << topo.status();
  return *topo;
}

CollectiveReport RunOn(const JobSpec& spec, HostNetwork& net) {
  auto planned = PlanJob(spec, net.topology(), 0);
  EXPECT_TRUE(planned.ok()) << planned.status();
  if (!planned.ok()) return {};
  auto run = RunPlannedJob(**planned, net, 1, nullptr);
  EXPECT_TRUE(run.ok()) << run.status();
  return run.ok() ? std::any_cast<CollectiveReport>(run->report) : CollectiveReport{};
}

TEST(ChipHandOverTest, EveryCollectiveRunFromTheDeliveringThreadInAnyOrderEqualsTheInMemoryRun) {
  const Topology topo = Ring8();
  for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter, CollectiveOp::kAllReduce,
                          CollectiveOp::kAllToAll})
  for (bool newest_first : {false, true}) {
    SCOPED_TRACE(OpName(op) + (newest_first ? ", newest frames first" : ""));
    CollectiveSpec spec;
    spec.op = op;
    spec.axes = {Axis::kX};
    spec.algorithm = RingAlgorithm::kBiRing;
    spec.dtype_bytes = 4;
    spec.bytes = 1 << 20;
    spec.chunk_bytes = 16 << 10;  // several frames per link: links fill while the delivering thread runs chips
    spec.seed = 7;
    InProcessPod memory(topo, 0);
    const CollectiveReport want = RunOn(spec, memory.network());
    QueuedPod queued(topo, newest_first);
    const CollectiveReport got = RunOn(spec, *queued.net);
    EXPECT_TRUE(got.correct) << got.mismatches << " mismatches";
    EXPECT_EQ(got.emulated_s, want.emulated_s);
    ASSERT_EQ(got.links.size(), want.links.size());
    for (size_t i = 0; i < got.links.size(); ++i) EXPECT_EQ(got.links[i].emu_bytes, want.links[i].emu_bytes);
    EXPECT_GT(queued.fabric.sent_from_queue_thread(), 0) << "no chip's program ran in the delivering thread";
  }
}

TEST(ChipHandOverTest, ATrainingJobRunFromTheDeliveringThreadHasTheInMemoryLossesAndTimes) {
  auto topo_or = Topology::Create({"v5p:2x4", 1, 1, "auto"});
  ASSERT_TRUE(topo_or.ok()) << topo_or.status();
  const Topology topo = *topo_or;
  auto spec = ParseTrainSpec(
      "ici_data_parallelism: 2\nici_tensor_parallelism: 4\nnum_layers: 2\nseed: 3\nlearning_rate: 0.01\n"
      "emb_dim: 64\nmlp_dim: 256\nglobal_batch_tokens: 64\n",
      "t.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto job = PlanTrainJob(*spec, topo, 0);
  ASSERT_TRUE(job.ok()) << job.status();
  auto train = [&](HostNetwork& net) {
    HostTrainer trainer(job->config, job->mesh, net, 1);
    EXPECT_TRUE(trainer.Prepare().ok());
    std::vector<StepReport> steps;
    for (int s = 0; s < 2; ++s) {
      auto chips = trainer.Run(s);
      EXPECT_TRUE(chips.ok()) << chips.status();
      if (chips.ok()) steps.push_back(SummarizeStep(job->config, job->mesh, topo, *chips));
    }
    return steps;
  };
  InProcessPod memory(topo, 0);
  const std::vector<StepReport> want = train(memory.network());
  QueuedPod queued(topo);
  const std::vector<StepReport> got = train(*queued.net);
  ASSERT_EQ(got.size(), want.size());
  for (size_t s = 0; s < got.size(); ++s) {
    EXPECT_EQ(got[s].loss, want[s].loss) << "step " << s;
    EXPECT_EQ(got[s].emulated_s, want[s].emulated_s) << "step " << s;
  }
  EXPECT_GT(queued.fabric.sent_from_queue_thread(), 0);
}

// Chip 0 of an 8-chip all-gather on its own: nobody sends to it.
struct LoneChip {
  explicit LoneChip(absl::Duration recv_timeout) : pod(Ring8()) {
    CollectiveSpec spec;
    spec.op = CollectiveOp::kAllGather;
    spec.axes = {Axis::kX};
    spec.bytes = 1 << 16;
    auto made = CollectivePlan::Create(pod.net->topology(), spec);
    EXPECT_TRUE(made.ok()) << made.status();
    plan = std::make_unique<CollectivePlan>(*std::move(made));
    options.job = 3;
    options.recv_timeout = recv_timeout;
    pod.net->mailbox().OpenJob(options.job, 1 << 20);
    chip = std::make_unique<ChipCollective>(*plan, 0, *pod.net, options);
    chip->Prepare();
  }
  QueuedPod pod;
  std::unique_ptr<CollectivePlan> plan;
  RunOptions options;
  std::unique_ptr<ChipCollective> chip;
};

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(ChipHandOverTest, AChipWaitingInTheMailboxTimesOutAfterItsReceiveTimeoutNamingTheLink) {
  LoneChip lone(absl::Milliseconds(300));
  const auto t0 = std::chrono::steady_clock::now();
  const absl::Status moved = lone.chip->Move();
  EXPECT_EQ(moved.code(), absl::StatusCode::kDeadlineExceeded) << moved;
  EXPECT_THAT(std::string(moved.message()), testing::HasSubstr("chip 0 waited 300ms for data from chip"));
  EXPECT_GE(SecondsSince(t0), 0.3);
  EXPECT_LT(SecondsSince(t0), 5.0);
}

TEST(ChipHandOverTest, AChipWaitingAtTheStartLineTimesOutAfterItsReceiveTimeout) {
  LoneChip lone(absl::Milliseconds(300));
  const auto t0 = std::chrono::steady_clock::now();
  const absl::Status moved = lone.chip->Move(StartBarrierRounds(*lone.plan));
  EXPECT_EQ(moved.code(), absl::StatusCode::kDeadlineExceeded) << moved;
  EXPECT_THAT(std::string(moved.message()), testing::HasSubstr("chip 0 waited 300ms for data from chip"));
  EXPECT_LT(SecondsSince(t0), 5.0);
}

TEST(ChipHandOverTest, AnAbortEndsAChipsWaitInTheMailboxAtOnce) {
  LoneChip lone(absl::Seconds(60));
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    lone.pod.net->mailbox().AbortJob(lone.options.job, absl::AbortedError("job aborted: worker host 2 failed"));
  });
  const auto t0 = std::chrono::steady_clock::now();
  const absl::Status moved = lone.chip->Move();
  aborter.join();
  EXPECT_EQ(moved.code(), absl::StatusCode::kAborted) << moved;
  EXPECT_LT(SecondsSince(t0), 5.0);
}

}  // namespace
}  // namespace tpuemu
