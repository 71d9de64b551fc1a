// A collective job's chips start their timed part together: no chip's timed
// part holds its wait for the last one to reach the start line, and an abort
// frees chips waiting there for a peer that never comes.
#include "core/collective/start_barrier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "core/collective/executor.h"
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

// Each of the 8 chips of an all-gather, prepared on one in-memory pod.
struct BarrierPod {
  explicit BarrierPod(RingAlgorithm algorithm)
      : topo(*Topology::Create({"v5p:8", 1, 8, "auto"})), pod(topo, 0),
        plan(Plan("v5p:8", {Axis::kX}, algorithm)) {
    pod.network().mailbox().OpenJob(kJob, 1 << 30);
    options.job = kJob;
    options.recv_timeout = absl::Seconds(60);
    for (int chip = 0; chip < 8; ++chip) {
      chips.push_back(std::make_unique<ChipCollective>(plan, chip, pod.network(), options));
      chips.back()->Prepare();
    }
  }
  static constexpr uint64_t kJob = 5;
  Topology topo;
  InProcessPod pod;
  CollectivePlan plan;
  RunOptions options;
  std::vector<std::unique_ptr<ChipCollective>> chips;
};

// Chip kLate reaches the start 600 ms after the others: returns each chip's
// timed part, in seconds.
std::vector<double> TimedWithALateChip(RingAlgorithm algorithm, bool start_line) {
  constexpr int kLate = 5;
  BarrierPod pod(algorithm);
  const int rounds = start_line ? StartBarrierRounds(pod.plan) : 0;
  std::vector<double> timed(8);
  OnThreads(8, [&](size_t chip) {
    if (chip == kLate) std::this_thread::sleep_for(std::chrono::milliseconds(600));
    ASSERT_TRUE(pod.chips[chip]->Move(rounds).ok());
    auto report = pod.chips[chip]->Report();
    ASSERT_TRUE(report.ok()) << report.status();
    timed[chip] = report->wall_s;
  });
  EXPECT_EQ(pod.pod.network().mailbox().pending(), 0u) << "nothing is left behind";
  for (int chip = 0; chip < 8; ++chip) EXPECT_EQ(pod.chips[chip]->CountMismatches(), 0u) << "chip " << chip;
  return timed;
}

TEST(StartBarrierTest, NoChipTimesItsWaitForTheLastToReachTheStartLine) {
  for (RingAlgorithm algorithm : {RingAlgorithm::kBiRing, RingAlgorithm::kUniRing}) {
    const std::vector<double> timed = TimedWithALateChip(algorithm, true);
    for (int chip = 0; chip < 8; ++chip) {
      EXPECT_GT(timed[chip], 0.0) << "chip " << chip;
      EXPECT_LT(timed[chip], 0.4) << "chip " << chip;
    }
  }
  // Without the line, the early chips' timed parts hold the wait.
  const std::vector<double> unlined = TimedWithALateChip(RingAlgorithm::kBiRing, false);
  EXPECT_GE(*std::max_element(unlined.begin(), unlined.end()), 0.4);
}

TEST(StartBarrierTest, AnAbortFreesChipsWaitingForAChipThatNeverComes) {
  BarrierPod pod(RingAlgorithm::kBiRing);
  const auto start = Clock::now();
  std::vector<absl::Status> status(7);
  std::thread abort([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    pod.pod.network().mailbox().AbortJob(BarrierPod::kJob, absl::AbortedError("chip 7 is gone"));
  });
  OnThreads(7, [&](size_t chip) { status[chip] = pod.chips[chip]->Move(StartBarrierRounds(pod.plan)); });
  abort.join();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  for (const absl::Status& s : status) EXPECT_EQ(s, absl::AbortedError("chip 7 is gone"));
}

}  // namespace
}  // namespace tpuemu
