// The pipeline bubble read off the emulated clock, next to the seeds'
// (S-1)/(repeats M + S-1), for each schedule as the model's F grows. The
// formula assumes free transfers. On a v5p ring of 4 stages a microbatch's
// forward through a stage does 4 b D F flops per layer and sends 2 b D
// bytes on: 2 F L_stage flops per byte, against the chip's C over one
// link one way, 4.59e14 / 9e10 = 5100 (seed 004's test for a pipeline; its
// Trillium figures, 917e12 / 180e9, give the same 5100). Below
// it the link, not the stage, sets the pace and the bubble is well above
// the formula; well above it the bubble comes down to the formula. The
// last table runs on a v5p whose compute is 1e5 times slower (a profile
// file), where transfers are negligible; the last sweeps the number of
// microbatches M on both. Every figure is a real training step on the
// in-memory pod (real matmuls, real bytes).
//   build/bin/pipeline_bubble [--plot FILE.svg|FILE.png] [tokens per microbatch] [F,...]
// --plot draws the microbatch sweep: the bubble against M beside the formula.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_args.h"
#include "bench/plot_flag.h"
#include "client/plots.h"
#include "core/train/host.h"
#include "core/job/inprocess_pod.h"
#include "core/train/job.h"
#include "core/train/report.h"

namespace tpuemu {
namespace {

struct Schedule {
  const char* name;
  int repeats;
};
constexpr int kStages = 4, kMicrobatches = 8, kLayers = 8;
constexpr int kSweptMicrobatches[] = {1, 2, 4, 8, 16, 32};

constexpr int64_t kWidth = 256;  // D

// One step on a v5p ring of 4 stages (`chip`: v5p or a profile file); its row
// printed, its bubble returned.
StepReport Row(const std::string& chip, int64_t mlp, int64_t tokens, const Schedule& s,
               int microbatches = kMicrobatches) {
  auto topo = Topology::Create({absl::StrCat(chip, ":4"), 1, 4, "auto"});
  const std::string yaml = absl::StrCat(
      "ici_pipeline_parallelism: 4\nici_fsdp_parallelism: 1\npipeline_schedule: ", s.name,
      "\nnum_pipeline_repeats: ", s.repeats, "\nnum_pipeline_microbatches: ", microbatches, "\nemb_dim: ", kWidth,
      "\nmlp_dim: ", mlp, "\nnum_layers: ", kLayers, "\nglobal_batch_tokens: ", tokens * microbatches,
      "\nopt_type: sgd\nlearning_rate: 0.1\n");
  auto spec = ParseTrainSpec(yaml, "sweep");
  auto job = !topo.ok() ? topo.status() : spec.ok() ? PlanTrainJob(*spec, *topo, 0) : spec.status();
  if (!job.ok()) {
    std::fprintf(stderr, "bad sweep point: %s\n", std::string(job.status().message()).c_str());
    std::exit(1);
  }
  InProcessPod pod(*topo, 0);
  HostTrainer trainer(job->config, job->mesh, pod.network(), 1);
  const absl::Status prepared = trainer.Prepare();
  auto chips = prepared.ok() ? trainer.Run(0) : absl::StatusOr<std::vector<ChipRunResult>>(prepared);
  if (!chips.ok()) {
    std::fprintf(stderr, "step failed: %s\n", std::string(chips.status().message()).c_str());
    std::exit(1);
  }
  const StepReport r = SummarizeStep(job->config, job->mesh, *topo, *chips);
  // A stage's forward and backward of one microbatch through one group.
  const double per_op = r.compute_s / (microbatches * s.repeats);
  const double intensity = 2.0 * mlp * kLayers / (kStages * s.repeats);
  std::printf("%-9s %3d %3d %7d %6lld %7lld %10.0f %12.2f %9.4f %9.4f %7.3f %9.4f %12.1f %10.1f\n", s.name, kStages,
              microbatches, s.repeats, static_cast<long long>(tokens), static_cast<long long>(mlp), intensity,
              per_op * 1e6, r.bubble_fraction, r.bubble_formula, r.bubble_fraction / r.bubble_formula,
              r.bubble_with_transfers, r.peak_activation_bytes / 1024.0, r.emulated_s * 1e6);
  std::fflush(stdout);
  return r;
}

void Header() {
  std::printf("%-9s %3s %3s %7s %6s %7s %10s %12s %9s %9s %7s %9s %12s %10s\n", "schedule", "S", "M", "repeats",
              "tok/mb", "F", "flops/B", "f+b/mb (us)", "bubble", "formula", "ratio", "w/ hops", "act/chip KiB",
              "step (us)");
}

}  // namespace
}  // namespace tpuemu

int main(int argc, char** argv) {
  using namespace tpuemu;
  const std::string plot = TakePlotFlag(argc, argv);
  const BenchArgs args(argc, argv,
                       "pipeline_bubble [--plot FILE.svg|FILE.png] [TOKENS [F,...]]\n"
                       "  the bubble of GPipe, 1F1B and circular schedules against the formula, with microbatches of\n"
                       "  TOKENS tokens (1 to 65536, default 128) and MLP widths F,... (1 to 1048576, default\n"
                       "  512,2048,8192,32768)",
                       2);
  const int64_t tokens = args.Whole(1, "TOKENS", 128, 1, 1 << 16);
  const std::vector<int64_t> mlps = args.WholeList(2, "F", {512, 2048, 8192, 32768}, 1, 1 << 20);
  const Schedule schedules[] = {{"gpipe", 1}, {"1f1b", 1}, {"circular", 2}};
  std::printf("v5p ring of %d stages (wraparound), D = %lld, %d layers, %d microbatches of %lld tokens, one step "
              "each; flops/B = 2 F L_stage, the chip's C / W_ici = 5100\n",
              kStages, static_cast<long long>(kWidth), kLayers, kMicrobatches, static_cast<long long>(tokens));
  Header();
  for (int64_t f : mlps) {
    for (const Schedule& s : schedules) Row("v5p", f, tokens, s);
  }
  const std::string slow = absl::StrCat("/tmp/pipeline-bubble-slow-v5p-", getpid(), ".yaml");
  std::ofstream(slow) << "base: v5p\nname: v5p-compute-1e5-slower\nflops_bf16: 4.59e9\n";
  std::printf("\nthe same on a v5p whose compute is 1e5 times slower (transfers negligible)\n");
  Header();
  for (const Schedule& s : schedules) Row(slow, mlps.front(), tokens, s);

  // The bubble against M, 1F1B: on the slow-compute v5p it follows the
  // formula; on v5p at the smallest F the stage hops add to it.
  std::printf("\n1f1b against the number of microbatches M (F = %lld)\n", static_cast<long long>(mlps.front()));
  Header();
  Chart chart;
  chart.title = "Pipeline bubble against microbatches: 1F1B on a v5p ring of 4 stages";
  chart.subtitle = absl::StrCat("D = ", kWidth, ", F = ", mlps.front(), ", ", kLayers, " layers, ", tokens,
                                " tokens per microbatch; emulated clock, one training step per point");
  chart.x = {"M, microbatches per step", true, 2, nullptr};
  chart.y = {"bubble (idle fraction of the stages' span)", false, 10, nullptr};
  PlotSeries on_v5p{"emulated, v5p", {}, false}, on_slow{"emulated, 1e5x slower compute", {}, false},
      formula{"seeds' formula (S-1)/(M+S-1)", {}, true}, with_hops{"formula with stage hops (v5p)", {}, true};
  for (int m : kSweptMicrobatches) {
    const StepReport fast = Row("v5p", mlps.front(), tokens, schedules[1], m);
    const StepReport slowed = Row(slow, mlps.front(), tokens, schedules[1], m);
    on_v5p.points.push_back({m, fast.bubble_fraction});
    on_slow.points.push_back({m, slowed.bubble_fraction});
    formula.points.push_back({m, fast.bubble_formula});
    with_hops.points.push_back({m, fast.bubble_with_transfers});
  }
  std::remove(slow.c_str());
  chart.series = {on_v5p, on_slow, formula, with_hops};
  if (!plot.empty()) {
    if (auto s = WriteChart(chart, plot); !s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 1;
    }
    std::printf("\nplotted the bubble against M in %s\n", plot.c_str());
  }
  return 0;
}
