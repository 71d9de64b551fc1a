// A collective job's chips start their timed part together: no chip leaves
// the start barrier before the last one has reached it, and an abort frees
// chips waiting there for a peer that never comes.
#include "core/collective/start_barrier.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/collective/chip_program.h"
#include "core/host/job.h"
#include "core/job/inprocess_pod.h"

namespace tpuemu {
namespace {

using Clock = std::chrono::steady_clock;

CollectivePlan Plan(const std::string& topology, std::vector<Axis> axes, RingAlgorithm algorithm) {
  auto topo = Topology::Create({topology, 1, 1, "auto"});
  EXPECT_TRUE(topo.ok()) << topo.status();
  CollectiveSpec spec;
  spec.op = CollectiveOp::kAllGather;
  spec.axes = std::move(axes);
  spec.algorithm = algorithm;
  spec.bytes = 3 << 20;
  spec.dtype_bytes = 4;
  auto plan = CollectivePlan::Create(*topo, spec);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return *std::move(plan);
}

TEST(StartBarrierTest, RoundsAreTheLongestShortestPathAlongThePlansLinks) {
  // A ring of 8 both ways: the opposite chip is 4 hops away; one way, 7.
  EXPECT_EQ(StartBarrierRounds(Plan("v5p:8", {Axis::kX}, RingAlgorithm::kBiRing)), 4);
  EXPECT_EQ(StartBarrierRounds(Plan("v5p:8", {Axis::kX}, RingAlgorithm::kUniRing)), 7);
  // Lines of 4 (v5e does not wrap a 4x4), corner to corner over two axes.
  EXPECT_EQ(StartBarrierRounds(Plan("v5e:4x4", {Axis::kX, Axis::kY}, RingAlgorithm::kAuto)), 6);
  EXPECT_EQ(StartBarrierRounds(Plan("v5p:4x4x4", {Axis::kX, Axis::kY, Axis::kZ}, RingAlgorithm::kAuto)), 6);
}

struct BarrierPod {
  explicit BarrierPod(RingAlgorithm algorithm)
      : topo(*Topology::Create({"v5p:8", 1, 8, "auto"})), pod(topo, 0),
        plan(Plan("v5p:8", {Axis::kX}, algorithm)) {
    pod.network().mailbox().OpenJob(kJob, 1 << 20);
    options.job = kJob;
    options.recv_timeout = absl::Seconds(60);
  }
  absl::Status Start(int chip) {
    return StartTogether(pod.network(), options, chip, BuildChipProgram(plan, chip, 1 << 18),
                         StartBarrierRounds(plan));
  }
  static constexpr uint64_t kJob = 5;
  Topology topo;
  InProcessPod pod;
  CollectivePlan plan;
  RunOptions options;
};

TEST(StartBarrierTest, NoChipLeavesBeforeTheLastHasArrived) {
  for (RingAlgorithm algorithm : {RingAlgorithm::kBiRing, RingAlgorithm::kUniRing}) {
    BarrierPod pod(algorithm);
    constexpr int kLate = 5;
    std::atomic<int64_t> late_arrived{0};
    std::vector<int64_t> left(8);
    OnThreads(8, [&](size_t chip) {
      if (chip == kLate) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        late_arrived = Clock::now().time_since_epoch().count();
      }
      ASSERT_TRUE(pod.Start(static_cast<int>(chip)).ok());
      left[chip] = Clock::now().time_since_epoch().count();
    });
    for (int chip = 0; chip < 8; ++chip) EXPECT_GE(left[chip], late_arrived.load()) << "chip " << chip;
    // Nothing is left behind for the collective's receives to trip over.
    EXPECT_EQ(pod.pod.network().mailbox().pending(), 0u);
  }
}

TEST(StartBarrierTest, AnAbortFreesChipsWaitingForAChipThatNeverComes) {
  BarrierPod pod(RingAlgorithm::kBiRing);
  const auto start = Clock::now();
  std::vector<absl::Status> status(7);
  std::thread abort([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    pod.pod.network().mailbox().AbortJob(BarrierPod::kJob, absl::AbortedError("chip 7 is gone"));
  });
  OnThreads(7, [&](size_t chip) { status[chip] = pod.Start(static_cast<int>(chip)); });
  abort.join();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  for (const absl::Status& s : status) EXPECT_EQ(s, absl::AbortedError("chip 7 is gone"));
}

}  // namespace
}  // namespace tpuemu
