// The job-kind registry, and a kind added by a test through the public
// interface only: registered, run by the in-process pod, summarised.
#include <memory>
#include <numeric>

#include "core/collective/spec.h"
#include "core/host/job_kind.h"
#include "core/job/inprocess_pod.h"
#include "core/job/kinds.h"
#include "core/matmul/spec.h"
#include "core/train/job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

// A job that sends nothing: every chip reports its number as its flops, for
// `steps` steps, and the summary adds up the last step's.
struct CountSpec {
  static constexpr char kKind[] = "count";
  int steps = 1;
};

class CountHost : public HostJob {
 public:
  CountHost(HostNetwork& net, const RunOptions& options) : HostJob(net, options.job, 0), net_(net) {}
  absl::Status Prepare() override { return absl::OkStatus(); }
  absl::StatusOr<std::vector<ChipRunResult>> Run(int step) override {
    std::vector<ChipRunResult> chips;
    for (int chip : net_.local_chips()) {
      ChipRunResult r;
      r.chip = chip;
      r.flops = uint64_t(chip);
      r.step = step;
      chips.push_back(std::move(r));
    }
    return chips;
  }
  std::vector<ChipCheck> Check() override { return {}; }

 private:
  HostNetwork& net_;
};

struct CountReport {
  int steps_seen = 0;
  uint64_t flops = 0;
};

class PlannedCount : public PlannedJob {
 public:
  explicit PlannedCount(int steps) : steps_(steps) {}
  int steps() const override { return steps_; }
  absl::StatusOr<std::unique_ptr<HostJob>> MakeHostJob(HostNetwork& net, const RunOptions& options) const override {
    return std::make_unique<CountHost>(net, options);
  }
  JobReport SummarizeStep(const std::vector<ChipRunResult>& chips) const override { return chips.front().step; }
  JobReport Summarize(const std::vector<ChipRunResult>& last_step, const std::vector<ChipCheck>&) const override {
    CountReport r{last_step.front().step + 1, 0};
    for (const ChipRunResult& c : last_step) r.flops += c.flops;
    return r;
  }

 private:
  const int steps_;
};

class CountKind : public JobKind {
 public:
  std::string name() const override { return CountSpec::kKind; }
  absl::StatusOr<std::unique_ptr<PlannedJob>> Plan(const JobSpec& spec, const Topology&, double) const override {
    const int steps = spec.get<CountSpec>()->steps;
    if (steps < 1) return absl::InvalidArgumentError("steps: must be at least 1");
    return std::make_unique<PlannedCount>(steps);
  }
};

Topology Pod() {
  auto topo = Topology::Create({"v5p:8", 1, 1, "x"});
  EXPECT_TRUE(topo.ok()) << topo.status();
  return *topo;
}

TEST(JobKindRegistryTest, FindsEveryBuiltInKind) {
  for (const std::string name : {CollectiveSpec::kKind, MatmulSpec::kKind, TrainSpec::kKind}) {
    auto kind = FindJobKind(name);
    ASSERT_TRUE(kind.ok()) << kind.status();
    EXPECT_EQ((*kind)->name(), name);
  }
}

// They fire on a first attempt only; kept, a resume on a pod of another shape
// was refused for a host they named, not for its checkpoint.
TEST(JobKindTest, AResumedTrainingJobDropsItsKillAndPauseWorkerFaultsAndKeepsTheOthers) {
  auto spec = ParseTrainSpec("emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nsteps: 6\nfaults:\n"
                             "  - kill_worker: 1 at 3\n  - pause_worker: 0 at 2 for 1s\n  - slow_link: x@0.5\n",
                             "kill.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto kind = FindJobKind(TrainSpec::kKind);
  ASSERT_TRUE(kind.ok());
  auto resumed = (*kind)->Resumed(JobSpec(*spec), 4);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  const TrainSpec& again = *resumed->get<TrainSpec>();
  EXPECT_EQ(again.resume_step, 4);
  EXPECT_TRUE(again.config.faults.workers.empty());
  EXPECT_EQ(again.config.faults.slow_links.size(), 1u);
}

TEST(JobKindTest, ACollectiveOverDcnOnOneSliceOfTwoNamesNumSlicesNotThePodsSlices) {
  auto topo = Topology::Create({"v5p:2x2", 2, 2, "auto"});
  ASSERT_TRUE(topo.ok()) << topo.status();
  CollectiveSpec spec;
  spec.op = CollectiveOp::kAllGather;
  spec.axes = {Axis::kDcn};
  spec.bytes = 1 << 20;
  spec.num_slices = 1;
  auto kind = FindJobKind(CollectiveSpec::kKind);
  ASSERT_TRUE(kind.ok());
  auto planned = (*kind)->Plan(JobSpec(spec), *topo, 0);
  ASSERT_FALSE(planned.ok());
  EXPECT_THAT(planned.status().message(),
              testing::HasSubstr("`num_slices` 1: one slice has no axis dcn; give `num_slices` 2 or more"));
  spec.num_slices = 2;
  EXPECT_TRUE((*kind)->Plan(JobSpec(spec), *topo, 0).ok());
}

TEST(JobKindRegistryTest, RefusesAnUnknownKindNamingTheKnownOnes) {
  auto kind = FindJobKind("sort");
  ASSERT_FALSE(kind.ok());
  EXPECT_EQ(kind.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(kind.status().message(), testing::HasSubstr("job kind 'sort'"));
  EXPECT_THAT(kind.status().message(), testing::HasSubstr("collective, matmul, train"));
}

TEST(JobKindRegistryTest, RefusesAKindRegisteredTwice) {
  class Again : public CountKind {
    std::string name() const override { return CollectiveSpec::kKind; }
  };
  EXPECT_EQ(RegisterJobKind(std::make_unique<Again>()).code(), absl::StatusCode::kAlreadyExists);
}

TEST(JobKindTest, ATestKindRunsThroughTheInProcessPod) {
  ASSERT_TRUE(RegisterJobKind(std::make_unique<CountKind>()).ok());
  InProcessPod pod(Pod(), 0);
  auto run = pod.Run(CountSpec{3});
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->steps.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(std::any_cast<int>(run->steps[i]), i);
  const auto& report = std::any_cast<const CountReport&>(run->report);
  EXPECT_EQ(report.steps_seen, 3);
  EXPECT_EQ(report.flops, 0u + 1 + 2 + 3 + 4 + 5 + 6 + 7);
  // Its spec is checked by its kind, as the built-in kinds' are.
  EXPECT_EQ(pod.Run(CountSpec{0}).status().message(), "steps: must be at least 1");
}

}  // namespace
}  // namespace tpuemu
