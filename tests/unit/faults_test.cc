// Faults on purpose (core/pod/faults.h, issue 17): their written forms and
// errors, when they are in force, and what they do on the emulated clock of
// real runs on the in-process pod: a slow axis adds exactly its bandwidth
// term to a bandwidth-bound collective, extra latency adds itself per hop on
// the critical path, a straggler makes the step wait for it, and no fault
// changes a single value computed.
#include <algorithm>

#include "core/collective/report.h"
#include "core/job/inprocess_pod.h"
#include "core/pod/faults.h"
#include "core/train/host.h"
#include "core/train/job.h"
#include "core/train/report.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

using ::testing::HasSubstr;

SlowLink ParsedLink(const std::string& text) {
  SlowLink s;
  const absl::Status status = ParseSlowLink(text, "--slow-link", &s);
  EXPECT_TRUE(status.ok()) << status;
  return s;
}

std::string LinkError(const std::string& text) {
  SlowLink s;
  const absl::Status status = ParseSlowLink(text, "--slow-link", &s);
  EXPECT_FALSE(status.ok()) << text;
  return std::string(status.message());
}

TEST(FaultsTest, SlowLinksAndStragglersAreReadFromTheirWrittenForms) {
  SlowLink axis = ParsedLink("x@0.5");
  EXPECT_EQ(axis.axis, Axis::kX);
  EXPECT_EQ(axis.dir, 0);
  EXPECT_EQ(axis.src, -1);
  EXPECT_EQ(axis.bandwidth, 0.5);
  EXPECT_EQ(axis.Describe(), "links x at 1/2 bandwidth");

  SlowLink later = ParsedLink("y-@1+2us from 3");
  EXPECT_EQ(later.axis, Axis::kY);
  EXPECT_EQ(later.dir, -1);
  EXPECT_DOUBLE_EQ(later.extra_latency_s, 2e-6);
  EXPECT_EQ(later.when.from_step, 3);
  EXPECT_EQ(later.Describe(), "links y- +2 us per hop, from step 3");

  SlowLink one = ParsedLink("0->1 x+@0.25");
  EXPECT_EQ(one.src, 0);
  EXPECT_EQ(one.dst, 1);
  EXPECT_EQ(one.dir, +1);
  EXPECT_EQ(one.Describe(), "link 0->1 x+ at 1/4 bandwidth");

  Straggler s;
  ASSERT_TRUE(ParseStraggler("3@2 from 5", "--straggler", &s).ok());
  EXPECT_EQ(s.chip, 3);
  EXPECT_EQ(s.factor, 2);
  EXPECT_EQ(s.when.from_step, 5);
  EXPECT_EQ(s.Describe(), "chip 3 computes 2x slower, from step 5");
}

TEST(FaultsTest, BadFormsNameTheFlagTheValueAndWhatIsAllowed) {
  EXPECT_THAT(LinkError("x@1.5"), HasSubstr("--slow-link 'x@1.5' bandwidth '1.5': a fraction"));
  EXPECT_THAT(LinkError("w@0.5"), HasSubstr("'w' is not an axis: x, y, z or dcn"));
  EXPECT_THAT(LinkError("x"), HasSubstr("give LINKS@FRACTION"));
  EXPECT_THAT(LinkError("x@1"), HasSubstr("slows nothing"));
  EXPECT_THAT(LinkError("0->1 x@0.5"), HasSubstr("names its direction"));
  EXPECT_THAT(LinkError("x@0.5+2 parsecs"), HasSubstr("extra latency"));
  EXPECT_THAT(LinkError("x@0.5 from soon"), HasSubstr("must name a step"));
  Straggler s;
  EXPECT_THAT(std::string(ParseStraggler("3@0.5", "--straggler", &s).message()), HasSubstr("above 1"));
  EXPECT_THAT(std::string(ParseStraggler("three", "--straggler", &s).message()), HasSubstr("CHIP@FACTOR"));
}

TEST(FaultsTest, WorkerFaultsNameTheHostTheStepAndHowLong) {
  WorkerFault kill, pause;
  ASSERT_TRUE(ParseWorkerFault("1 at 3", true, "kill_worker", &kill).ok());
  EXPECT_EQ(kill.Describe(), "worker of host 1 killed at step 3");
  ASSERT_TRUE(ParseWorkerFault("0 at 2 for 1.5s", false, "pause_worker", &pause).ok());
  EXPECT_EQ(pause.pause_s, 1.5);
  EXPECT_EQ(pause.Describe(), "worker of host 0 frozen for 1.5 s at step 2");
  WorkerFault bad;
  EXPECT_THAT(std::string(ParseWorkerFault("1", true, "kill_worker", &bad).message()), HasSubstr("HOST at STEP"));
  EXPECT_THAT(std::string(ParseWorkerFault("1 at 2 for 20m", false, "pause_worker", &bad).message()),
              HasSubstr("at most 10m"));
  auto topo = Topology::Create({"v5p:2x2", 1, 2, "auto"});
  ASSERT_TRUE(topo.ok());
  EXPECT_THAT(std::string(CheckFaults([] {
                Faults f;
                f.workers = {{true, 2, 1, 0}};
                return f;
              }(), *topo, "faults").message()),
              HasSubstr("faults: kill_worker 1 host '2': a host of the job, 0 to 1"));
}

TEST(FaultsTest, WorkerFaultsNeedWorkerProcesses) {
  auto topo = Topology::Create({"v5p:2x2", 1, 2, "auto"});
  ASSERT_TRUE(topo.ok());
  auto spec = ParseTrainSpec("emb_dim: 32\nmlp_dim: 64\nglobal_batch_tokens: 64\nsteps: 2\n"
                             "faults:\n  - kill_worker: 1 at 1\n", "kill.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  InProcessPod pod(*topo, 0);
  auto run = pod.Run(JobSpec(*spec));
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(std::string(run.status().message()), HasSubstr("need a pod of worker processes"));
}

TEST(FaultsTest, EachFaultIsInForceOnItsLinksFromItsStep) {
  Faults f;
  f.slow_links = {ParsedLink("x+@0.5 from 2"), ParsedLink("0->1 y+@1+1us")};
  f.stragglers = {{3, 2, {1}}};
  const LinkParams base{100, 1e-6};
  EXPECT_EQ(f.Link(base, 0, 1, Axis::kX, +1, 1).bw_dir, 100);  // before step 2
  EXPECT_EQ(f.Link(base, 0, 1, Axis::kX, +1, 2).bw_dir, 50);
  EXPECT_EQ(f.Link(base, 1, 0, Axis::kX, -1, 2).bw_dir, 100);  // the other direction
  EXPECT_DOUBLE_EQ(f.Link(base, 0, 1, Axis::kY, +1, 0).latency, 2e-6);
  EXPECT_DOUBLE_EQ(f.Link(base, 0, 2, Axis::kY, +1, 0).latency, 1e-6);  // another y link
  EXPECT_EQ(f.ComputeFactor(3, 0), 1);
  EXPECT_EQ(f.ComputeFactor(3, 1), 2);
  EXPECT_EQ(f.ComputeFactor(2, 1), 1);
  EXPECT_EQ(f.ActiveAt(0).size(), 1u);
  EXPECT_EQ(f.ActiveAt(2).size(), 3u);
}

TEST(FaultsTest, FaultsMustNameWhatThePodHas) {
  auto topo = Topology::Create({"v5p:4x4", 1, 4, "auto"});
  ASSERT_TRUE(topo.ok());
  auto faults = [](std::vector<SlowLink> slow, std::vector<Straggler> stragglers) {
    Faults f;
    f.slow_links = std::move(slow);
    f.stragglers = std::move(stragglers);
    return f;
  };
  auto error = [&](Faults f) { return std::string(CheckFaults(f, *topo, "faults").message()); };
  EXPECT_THAT(error(faults({ParsedLink("z@0.5")}, {})), HasSubstr("faults: slow_link 1 'z': this pod"));
  EXPECT_THAT(error(faults({ParsedLink("0->5 x+@0.5")}, {})), HasSubstr("no such link"));
  EXPECT_THAT(error(faults({}, {{16, 2, {}}})), HasSubstr("faults: straggler 1 chip '16': a chip of this pod, 0 to 15"));
  EXPECT_TRUE(CheckFaults(faults({ParsedLink("0->1 x+@0.5")}, {{15, 2, {}}}), *topo, "faults").ok());
}

// A fault that would begin after the job's last step never happens: refused,
// not ignored (`kill_worker: 1 at 99999` in a one-step job was accepted).
// Ten slow links at 1/1000 on one axis made a collective's emulated time
// overflow to a negative number: faults in force together are held to one
// fault's limits, and those that never overlap are not.
TEST(FaultsTest, FaultsInForceTogetherAreHeldToOneFaultsLimits) {
  auto check = [](Faults f) { return CheckFaultValues(f, "faults"); };
  Faults f;
  f.slow_links = {ParsedLink("y+@0.01"), ParsedLink("y@0.01 from 2"), ParsedLink("0->1 y+@0.5")};
  const absl::Status stacked = check(f);
  EXPECT_EQ(stacked.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(stacked.message()), HasSubstr("slow_links 1 and 2 together at step 2"));
  EXPECT_THAT(std::string(stacked.message()), HasSubstr("give fewer, or windows"));
  f.slow_links[1] = ParsedLink("y-@0.01 from 2");  // the other direction: each link slowed once
  EXPECT_TRUE(check(f).ok()) << check(f);
  f.slow_links = {ParsedLink("x@0.01 until 3"), ParsedLink("x@0.01 from 3")};  // one after the other
  EXPECT_TRUE(check(f).ok()) << check(f);
  f.slow_links = {ParsedLink("0->1 x+@1+600ms"), ParsedLink("x@1+500ms")};  // the latencies add up past 1 s
  EXPECT_THAT(std::string(check(f).message()), HasSubstr("slow_links 1 and 2 together at step 0"));
  f.slow_links.clear();
  Straggler s;
  ASSERT_TRUE(ParseStraggler("3@40", "--straggler", &s).ok());
  f.stragglers = {s, s};
  EXPECT_THAT(std::string(check(f).message()), HasSubstr("stragglers 1 and 2 together at step 0 'chip 3 1600x slower'"));
  f.stragglers[1].chip = 4;
  EXPECT_TRUE(check(f).ok()) << check(f);
  f.stragglers.assign(kMaxFaults + 1, s);
  for (size_t i = 0; i < f.stragglers.size(); ++i) f.stragglers[i].chip = static_cast<int>(i);
  EXPECT_THAT(std::string(check(f).message()), HasSubstr("'65 faults': at most 64"));
}

TEST(FaultsTest, AFaultBeginningAfterTheLastStepIsRefused) {
  Faults f;
  f.slow_links = {ParsedLink("x@0.5 from 9")};
  EXPECT_TRUE(CheckFaultsBegin(f, 10, "faults").ok());
  EXPECT_THAT(std::string(CheckFaultsBegin(f, 9, "faults").message()),
              HasSubstr("faults: slow_link 1 from '9': the job's steps are 0 to 8: it would never happen"));
  EXPECT_THAT(std::string(CheckFaultsBegin(f, 1, "faults").message()), HasSubstr("the job has one step, step 0"));
  Faults kill;
  kill.workers = {{true, 1, 99999, 0}};
  EXPECT_THAT(std::string(CheckFaultsBegin(kill, 1, "faults").message()),
              HasSubstr("faults: kill_worker 1 at '99999'"));
}

CollectiveReport RunAllGather(const std::vector<SlowLink>& slow) {
  auto topo = Topology::Create({"v5p:8", 1, 1, "auto"});
  EXPECT_TRUE(topo.ok());
  InProcessPod pod(*topo, 0);
  CollectiveSpec spec;
  spec.op = CollectiveOp::kAllGather;
  spec.axes = {Axis::kX};
  spec.bytes = 8 << 20;
  spec.faults.slow_links = slow;
  auto r = RunReport<CollectiveReport>(pod, spec);
  EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->correct);
  return *r;
}

TEST(FaultsTest, ASlowAxisAddsExactlyItsBandwidthTermAndExtraLatencyItsHop) {
  const CollectiveReport healthy = RunAllGather({});
  uint64_t busiest = 0;
  for (const LinkUse& l : healthy.links) busiest = std::max(busiest, l.emu_bytes);
  const double w = Topology::Create({"v5p:8", 1, 1, "auto"})->Link(Axis::kX).bw_dir;
  const double bandwidth_term = busiest / w;

  const CollectiveReport half = RunAllGather({ParsedLink("x@0.5")});
  std::printf("8 MiB all-gather on a v5p ring of 8: %.3f us healthy, %.3f us at 1/2 bandwidth (+%.3f us, "
              "bandwidth term %.3f us)\n",
              healthy.emulated_s * 1e6, half.emulated_s * 1e6, (half.emulated_s - healthy.emulated_s) * 1e6,
              bandwidth_term * 1e6);
  EXPECT_NEAR(half.emulated_s - healthy.emulated_s, bandwidth_term, 1e-6 * bandwidth_term);
  EXPECT_EQ(half.faults, std::vector<std::string>{"links x at 1/2 bandwidth"});
  EXPECT_NEAR(half.ratio, half.emulated_s / healthy.predicted_s, 1e-12);  // predicted_s stays the healthy one

  const CollectiveReport later = RunAllGather({ParsedLink("x@1+5us")});
  EXPECT_NEAR(later.emulated_s - healthy.emulated_s, 5e-6, 1e-9);  // bandwidth-bound: one hop on the critical path
}

TEST(FaultsTest, AStragglerMakesTheStepWaitAndNoFaultChangesAValue) {
  auto topo = Topology::Create({"v5p:2x2", 1, 1, "auto"});
  ASSERT_TRUE(topo.ok());
  const std::string job =
      "ici_data_parallelism: 2\nici_fsdp_parallelism: 2\nemb_dim: 64\nmlp_dim: 256\nnum_layers: 2\n"
      "global_batch_tokens: 256\nsteps: 2\nseed: 3\n";
  // Two steps; the reports of both and the chips' results of the last.
  auto run = [&](const std::string& faults) {
    auto spec = ParseTrainSpec(job + faults, "faults.yaml");
    EXPECT_TRUE(spec.ok()) << spec.status();
    auto planned = PlanTrainJob(*spec, *topo, 0);
    EXPECT_TRUE(planned.ok()) << planned.status();
    InProcessPod pod(*topo, 0);
    HostTrainer trainer(planned->config, planned->mesh, pod.network(), 1);
    EXPECT_TRUE(trainer.Prepare().ok());
    std::vector<StepReport> steps;
    std::vector<ChipRunResult> chips;
    for (int step = 0; step < 2; ++step) {
      auto ran = trainer.Run(step);
      EXPECT_TRUE(ran.ok()) << ran.status();
      chips = *ran;
      steps.push_back(SummarizeStep(planned->config, planned->mesh, *topo, chips));
    }
    return std::make_pair(steps, chips);
  };
  const auto [healthy, healthy_chips] = run("");
  const auto [slow, slow_chips] = run("faults:\n  - straggler: 1@2 from 1\n  - slow_link: y@0.5\n");
  ASSERT_EQ(healthy.size(), 2u);
  ASSERT_EQ(slow.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(slow[i].loss, healthy[i].loss) << "step " << i;  // bit for bit
    EXPECT_GT(slow[i].emulated_s, healthy[i].emulated_s) << "step " << i;
  }
  EXPECT_EQ(slow[0].faults, std::vector<std::string>{"links y at 1/2 bandwidth"});
  EXPECT_EQ(slow[1].faults.size(), 2u);
  EXPECT_EQ(slow[1].faults[1], "chip 1 computes 2x slower, from step 1");
  // Step 1's trace: chip 1's matmuls say why they are slow; the others wait.
  bool marked = false, others_wait = false;
  for (const ChipRunResult& chip : slow_chips) {
    for (const TraceEvent& e : chip.trace) {
      if (chip.chip == 1 && e.name.find("(straggler 2x)") != std::string::npos) marked = true;
      if (chip.chip != 1 && e.name.rfind("wait", 0) == 0) others_wait = true;
    }
  }
  EXPECT_TRUE(marked);
  EXPECT_TRUE(others_wait);
}

}  // namespace
}  // namespace tpuemu
