// Down links (issue 17): a link that carries nothing. A collective whose
// schedule needs it fails naming it; with on_down_link: route, a ring that
// wraps runs its one-way algorithm the other way round, correctly and at
// exactly the one-way ring's emulated time; a training job meets the link
// at the step it goes down. Windows of steps for every fault.
#include "core/collective/plan.h"
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

DownLink Down(const std::string& text) {
  DownLink d;
  const absl::Status status = ParseDownLink(text, "--down-link", &d);
  EXPECT_TRUE(status.ok()) << status;
  return d;
}

std::string DownError(const std::string& text) {
  DownLink d;
  return std::string(ParseDownLink(text, "--down-link", &d).message());
}

TEST(DownLinkTest, IsReadFromItsWrittenFormWithAWindowOfSteps) {
  const DownLink d = Down("0->1 x+ from 2 until 5");
  EXPECT_EQ(d.src, 0);
  EXPECT_EQ(d.dst, 1);
  EXPECT_EQ(d.dir, +1);
  EXPECT_EQ(d.Describe(), "link 0->1 x+ down, steps 2 to 4");
  EXPECT_EQ(Down("3->2 y-").Describe(), "link 3->2 y- down");
  EXPECT_EQ(Down("3->2 y- from 1 until 2").Describe(), "link 3->2 y- down, at step 1");
  EXPECT_THAT(DownError("x+"), HasSubstr("give SRC->DST AXIS+|-"));
  EXPECT_THAT(DownError("0->1 x"), HasSubstr("names its direction"));
  EXPECT_THAT(DownError("0->1 x+ from 3 until 3"), HasSubstr("until '3': a step after its first (3)"));
  EXPECT_THAT(DownError("0->1 x+ until never"), HasSubstr("'until never' must name a step"));
  bool route = false;
  EXPECT_THAT(std::string(ParseOnDownLink("reroute", "--on-down-link", &route).message()),
              HasSubstr("--on-down-link 'reroute': fail (a collective"));
  ASSERT_TRUE(ParseOnDownLink("route", "--on-down-link", &route).ok());
  EXPECT_TRUE(route);
}

TEST(DownLinkTest, EveryFaultKeepsToItsWindow) {
  Faults f;
  ASSERT_TRUE(ParseSlowLink("x@0.5 from 1 until 3", "--slow-link", &f.slow_links.emplace_back()).ok());
  ASSERT_TRUE(ParseStraggler("2@4 until 2", "--straggler", &f.stragglers.emplace_back()).ok());
  f.down_links = {Down("0->1 x+ from 2 until 4")};
  const LinkParams base{100, 1e-6};
  const double bw[] = {100, 50, 50, 100};
  const double slower[] = {4, 4, 1, 1};
  for (int step = 0; step < 4; ++step) {
    EXPECT_EQ(f.Link(base, 0, 1, Axis::kX, +1, step).bw_dir, bw[step]) << step;
    EXPECT_EQ(f.ComputeFactor(2, step), slower[step]) << step;
    EXPECT_EQ(f.Down(0, 1, Axis::kX, +1, step) != nullptr, step == 2 || step == 3) << step;
  }
  EXPECT_EQ(f.Down(1, 0, Axis::kX, -1, 2), nullptr);  // the other direction carries on
  EXPECT_EQ(f.ActiveAt(0), (std::vector<std::string>{"chip 2 computes 4x slower, steps 0 to 1"}));
  EXPECT_EQ(f.ActiveAt(4).size(), 0u);
  EXPECT_EQ(f.DownAt(3), std::vector<int>{0});
}

Topology Ring8() {
  auto topo = Topology::Create({"v5p:8", 1, 1, "auto"});
  EXPECT_TRUE(topo.ok());
  return *topo;
}

CollectiveSpec Spec(CollectiveOp op, const std::vector<DownLink>& down, bool route) {
  CollectiveSpec spec;
  spec.op = op;
  spec.axes = {Axis::kX};
  spec.bytes = 8 << 20;
  spec.faults.down_links = down;
  spec.faults.route_around = route;
  return spec;
}

TEST(DownLinkTest, ACollectiveThatNeedsItFailsNamingIt) {
  const Topology topo = Ring8();
  auto plan = PlanCollectiveJob(topo, Spec(CollectiveOp::kAllGather, {Down("3->4 x+")}, false));
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(std::string(plan.status().message()),
              HasSubstr("faults: link 3->4 x+ down: the all-gather over x (bi-ring) needs it; to go the other "
                        "way round the ring instead, give on_down_link: route"));
  // Down both ways: no way round.
  auto both = PlanCollectiveJob(topo, Spec(CollectiveOp::kAllReduce, {Down("3->4 x+"), Down("6->5 x-")}, true));
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(std::string(both.status().message()), HasSubstr("links are down both ways along x"));
  // A line has no other way round.
  auto line = Topology::Create({"v5e:4x4", 1, 4, "auto"});
  ASSERT_TRUE(line.ok());
  auto on_line = PlanCollectiveJob(*line, Spec(CollectiveOp::kAllGather, {Down("0->1 x+")}, true));
  ASSERT_FALSE(on_line.ok());
  EXPECT_THAT(std::string(on_line.status().message()), HasSubstr("does not wrap: there is no other way round"));
  // A one-way ring that never uses it runs as asked.
  CollectiveSpec uni = Spec(CollectiveOp::kAllGather, {Down("3->2 x-")}, false);
  uni.algorithm = RingAlgorithm::kUniRing;
  EXPECT_TRUE(PlanCollectiveJob(topo, uni).ok());
}

TEST(DownLinkTest, RoutedRoundItEveryOpIsCorrectAtExactlyTheOneWayRingsTime) {
  const Topology topo = Ring8();
  for (CollectiveOp op :
       {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter, CollectiveOp::kAllReduce, CollectiveOp::kAllToAll}) {
    InProcessPod pod(topo, 0);
    CollectiveSpec one_way = Spec(op, {}, false);
    one_way.algorithm = RingAlgorithm::kUniRing;
    auto healthy = RunReport<CollectiveReport>(pod, one_way);
    ASSERT_TRUE(healthy.ok()) << healthy.status();
    auto routed = RunReport<CollectiveReport>(pod, Spec(op, {Down("3->4 x+")}, true));
    ASSERT_TRUE(routed.ok()) << routed.status();
    std::printf("%s over a v5p ring of 8, 8 MiB, link 3->4 x+ down: routed %.3f us, one-way ring %.3f us\n",
                OpName(op).c_str(), routed->emulated_s * 1e6, healthy->emulated_s * 1e6);
    EXPECT_TRUE(routed->correct) << OpName(op);
    EXPECT_EQ(routed->emulated_s, healthy->emulated_s) << OpName(op);
    EXPECT_EQ(routed->algorithm, "uni-ring going -");
    EXPECT_EQ(routed->predicted_s, healthy->predicted_s) << OpName(op);
    EXPECT_EQ(routed->faults, (std::vector<std::string>{"link 3->4 x+ down",
                                                        "x routed round its down link(s): a one-way ring going -"}));
    for (const LinkUse& l : routed->links) EXPECT_EQ(l.dir, -1) << OpName(op) << ": a + link carried bytes";
  }
}

constexpr char kDataParallel[] = "ici_data_parallelism: 4\n";

// A job on a ring of 4 (data parallel unless told), three steps or until one
// fails; `last` gets the chips' results of the last step that ran.
std::vector<absl::StatusOr<StepReport>> TrainWithDownLink(const std::string& faults,
                                                          const std::string& mesh = kDataParallel,
                                                          std::vector<ChipRunResult>* last = nullptr) {
  auto topo = Topology::Create({"v5p:4", 1, 1, "auto"});
  EXPECT_TRUE(topo.ok());
  auto spec = ParseTrainSpec(mesh + "emb_dim: 64\nmlp_dim: 256\nnum_layers: 4\nglobal_batch_tokens: 256\n"
                             "steps: 3\nseed: 3\n" + faults,
                             "down.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto planned = PlanTrainJob(*spec, *topo, 0);
  EXPECT_TRUE(planned.ok()) << planned.status();
  InProcessPod pod(*topo, 0);
  HostTrainer trainer(planned->config, planned->mesh, pod.network(), 1);
  EXPECT_TRUE(trainer.Prepare().ok());
  std::vector<absl::StatusOr<StepReport>> steps;
  for (int step = 0; step < 3; ++step) {
    auto ran = trainer.Run(step);
    if (!ran.ok()) {
      steps.push_back(ran.status());
      break;
    }
    steps.push_back(SummarizeStep(planned->config, planned->mesh, *topo, *ran));
    if (last != nullptr) *last = *ran;
  }
  return steps;
}

TEST(DownLinkTest, ATrainingJobMeetsItAtTheStepItGoesDown) {
  const auto healthy = TrainWithDownLink("");
  const auto failed = TrainWithDownLink("faults:\n  - down_link: 0->1 x+ from 1\n");
  ASSERT_EQ(failed.size(), 2u);
  ASSERT_TRUE(failed[0].ok());
  ASSERT_FALSE(failed[1].ok());
  EXPECT_THAT(std::string(failed[1].status().message()),
              HasSubstr("step 1: all-reduce over data: faults: link 0->1 x+ down, from step 1"));

  std::vector<ChipRunResult> last;
  const auto routed =
      TrainWithDownLink("faults:\n  - down_link: 0->1 x+ from 1\non_down_link: route\n", kDataParallel, &last);
  ASSERT_EQ(routed.size(), 3u);
  ASSERT_EQ(healthy.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(routed[i].ok()) << routed[i].status();
    // The one-way ring sums in another order: equal to rounding.
    EXPECT_NEAR(routed[i]->loss, healthy[i]->loss, 1e-6 * healthy[i]->loss) << "step " << i;
  }
  EXPECT_EQ(routed[0]->emulated_s, healthy[0]->emulated_s);
  EXPECT_GT(routed[1]->emulated_s, healthy[1]->emulated_s);  // the one-way ring is slower
  EXPECT_THAT(routed[1]->faults, ::testing::ElementsAre("link 0->1 x+ down, from step 1",
                                                        HasSubstr("go the other way round their ring")));
  // The trace names the transfers that went the other way round.
  int marked = 0;
  for (const ChipRunResult& chip : last) {
    for (const TraceEvent& e : chip.trace) {
      if (e.name.find("(routed round a down link)") != std::string::npos) ++marked;
    }
  }
  EXPECT_GT(marked, 0);
}

// With on_down_link: route, links no ring can go round are the job file's
// error at submit, naming the step, the collective and why; not a job that
// fails at that step after running the ones before.
TEST(DownLinkTest, ARouteThatCannotBeIsRefusedAtSubmit) {
  auto topo = Topology::Create({"v5p:4", 1, 1, "auto"});  // x: a ring of 4
  ASSERT_TRUE(topo.ok());
  const std::string job = std::string(kDataParallel) +
                          "emb_dim: 64\nmlp_dim: 256\nnum_layers: 1\nglobal_batch_tokens: 256\nsteps: 3\non_down_link: "
                          "route\nfaults:\n  - down_link: 0->1 x+ from 1\n";
  auto one_way = ParseTrainSpec(job, "down.yaml");
  ASSERT_TRUE(one_way.ok()) << one_way.status();
  const auto planned = PlanTrainJob(*one_way, *topo, 0);
  EXPECT_TRUE(planned.ok()) << planned.status();
  auto both_ways = ParseTrainSpec(job + "  - down_link: 2->1 x- from 2\n", "down.yaml");
  ASSERT_TRUE(both_ways.ok()) << both_ways.status();
  const auto refused = PlanTrainJob(*both_ways, *topo, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("at step 2, a layer's gradient all-reduce over data cannot run: faults: link 2->1 x- down"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("links are down both ways along x"));
}

TEST(DownLinkTest, APipelineSendOverItFailsNamingItWithoutHanging) {
  const auto failed = TrainWithDownLink("faults:\n  - down_link: 1->2 x+ from 1\non_down_link: route\n",
                                        "ici_pipeline_parallelism: 4\nnum_pipeline_microbatches: 2\n");
  ASSERT_EQ(failed.size(), 2u);
  ASSERT_TRUE(failed[0].ok()) << failed[0].status();
  ASSERT_FALSE(failed[1].ok());
  EXPECT_THAT(std::string(failed[1].status().message()),
              HasSubstr("faults: link 1->2 x+ down, from step 1: the pipeline's send to the next stage needs it"));
}

}  // namespace
}  // namespace tpuemu
