// Seed 001's compute/communication boundary for data parallelism, read off
// the emulated clock: on a v5p ring of 16 chips (one wraparound axis), per
// layer, the backward matmuls take 8 (B/X) D F / C and the gradient
// AllReduces 8 D F / W_ici, so DP turns compute-bound when the tokens per
// chip B/X pass C / W_ici = 4.59e14 / 1.8e11 = 2550. Every figure below is
// what the emulated chips and links did in a real training step (real
// matmuls, real bytes); the seed's numbers are printed beside them.
//   build/bin/dp_boundary [--plot FILE.svg|FILE.png] [D=F] [tokens per chip,...]
// --plot draws both times against B/X with the seed's lines and the boundary.
#include <cmath>
#include <cstdio>
#include <cstdlib>
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

struct Point {
  int64_t tokens_per_chip;
  double math_s, comm_s, step_s, exposed_s, compute_s;
};

Point Measure(const Topology& topo, int64_t width, int64_t tokens_per_chip) {
  const std::string yaml = absl::StrCat(
      "ici_data_parallelism: -1\nici_fsdp_parallelism: 1\nemb_dim: ", width, "\nmlp_dim: ", width,
      "\nnum_layers: 1\nglobal_batch_tokens: ", tokens_per_chip * topo.num_chips(),
      "\nopt_type: sgd\nlearning_rate: 0.1\nsteps: 1\n");
  auto spec = ParseTrainSpec(yaml, "sweep");
  auto job = spec.ok() ? PlanTrainJob(*spec, topo, 0) : spec.status();
  if (!job.ok()) {
    std::fprintf(stderr, "bad sweep point: %s\n", std::string(job.status().message()).c_str());
    std::exit(1);
  }
  InProcessPod pod(topo, 0);
  HostTrainer trainer(job->config, job->mesh, pod.network(), 1);
  const absl::Status prepared = trainer.Prepare();
  auto chips = prepared.ok() ? trainer.Run(0) : absl::StatusOr<std::vector<ChipRunResult>>(prepared);
  if (!chips.ok()) {
    std::fprintf(stderr, "step failed: %s\n", std::string(chips.status().message()).c_str());
    std::exit(1);
  }
  const StepReport r = SummarizeStep(job->config, job->mesh, topo, *chips);
  const int data = static_cast<int>(MeshAxisKind::kData);
  return {tokens_per_chip, r.compute_parts_s[1], r.comm_s[data], r.emulated_s, r.exposed_comm_s[data], r.compute_s};
}

}  // namespace
}  // namespace tpuemu

int main(int argc, char** argv) {
  using namespace tpuemu;
  const std::string plot = TakePlotFlag(argc, argv);
  const BenchArgs args(argc, argv,
                       "dp_boundary [--plot FILE.svg|FILE.png] [D [B,...]]\n"
                       "  data parallelism's compute/communication boundary on a v5p ring of 16: a one-layer MLP\n"
                       "  with D = F (16 to 8192, default 3072) at per-chip batches B,... tokens (1 to 1048576,\n"
                       "  default 1024,2048,3072,4096)",
                       2);
  const int64_t width = args.Whole(1, "D", 3072, 16, 8192);
  const std::vector<int64_t> tokens = args.WholeList(2, "B", {1024, 2048, 3072, 4096}, 1, 1 << 20);
  auto topo = Topology::Create({"v5p:16", 1, 4, "auto"});
  const double c = topo->profile().flops_bf16, w = 2 * topo->profile().ici_bw_dir;
  std::printf("DP on v5p:16 (one wraparound axis, X = 16), D = F = %lld, 1 layer, bf16; C / W_ici = %.0f\n",
              static_cast<long long>(width), c / w);
  std::printf("per layer and step, emulated clock (seed's formula beside it):\n");
  std::printf("%8s %14s %14s %14s %14s %8s %12s %12s  %s\n", "B/X", "T_math bwd", "(seed)", "T_comms", "(seed)",
              "ratio", "step", "exposed", "regime");
  std::vector<Point> points;
  for (int64_t t : tokens) {
    const Point p = Measure(*topo, width, t);
    points.push_back(p);
    const double seed_math = 8.0 * t * width * width / c, seed_comm = 8.0 * width * width / w;
    std::printf("%8lld %12.1f us %12.1f us %12.1f us %12.1f us %8.3f %9.1f us %9.1f us  %s\n",
                static_cast<long long>(t), p.math_s * 1e6, seed_math * 1e6, p.comm_s * 1e6, seed_comm * 1e6,
                p.math_s / p.comm_s, p.step_s * 1e6, p.exposed_s * 1e6,
                p.math_s >= p.comm_s ? "compute-bound" : "communication-bound");
    std::fflush(stdout);
  }
  // T_math grows linearly with B/X and T_comms does not depend on it: the
  // boundary is where the fitted line through the measured points meets the
  // measured communication time.
  double sxx = 0, sxy = 0, comm = 0;
  for (const Point& p : points) {
    sxx += static_cast<double>(p.tokens_per_chip) * p.tokens_per_chip;
    sxy += p.tokens_per_chip * p.math_s;
    comm += p.comm_s / points.size();
  }
  const double boundary = comm / (sxy / sxx);
  std::printf("\nmeasured boundary: B/X = %.0f tokens per chip (seed: C / W_ici = %.0f; %+.1f%%)\n", boundary, c / w,
              100 * (boundary / (c / w) - 1));
  // A plot: per-layer backward matmul time and gradient AllReduce time.
  std::printf("\n  time per layer (each # is 1/50 of the largest)\n");
  double top = 0;
  for (const Point& p : points) top = std::max({top, p.math_s, p.comm_s});
  for (const Point& p : points) {
    const int m = static_cast<int>(std::lround(50 * p.math_s / top)), k = static_cast<int>(std::lround(50 * p.comm_s / top));
    std::printf("  %6lld math  |%s\n         comms |%s\n", static_cast<long long>(p.tokens_per_chip),
                std::string(m, '#').c_str(), std::string(k, '=').c_str());
  }
  if (!plot.empty()) {
    Chart chart;
    chart.title = "DP's compute/communication boundary on v5p:16 (emulated clock)";
    chart.subtitle = absl::StrCat("per layer and step, D = F = ", width, ", bf16; measured boundary B/X = ",
                                  std::lround(boundary), ", seed's C / W_ici = ", std::lround(c / w));
    chart.x = {"B/X, tokens per chip", false, 10, nullptr};
    chart.y = {"time per layer (us, emulated clock)", false, 10, nullptr};
    PlotSeries math{"backward matmuls (emulated)", {}, false}, comms{"gradient all-reduce (emulated)", {}, false},
        seed_math{"seed: 8 (B/X) D F / C", {}, true}, seed_comms{"seed: 8 D F / W_ici", {}, true};
    for (const Point& p : points) {
      const double x = static_cast<double>(p.tokens_per_chip);
      math.points.push_back({x, p.math_s * 1e6});
      comms.points.push_back({x, p.comm_s * 1e6});
      seed_math.points.push_back({x, 8.0 * x * width * width / c * 1e6});
      seed_comms.points.push_back({x, 8.0 * width * width / w * 1e6});
    }
    chart.series = {math, comms, seed_math, seed_comms};
    if (auto s = WriteChart(chart, plot); !s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 1;
    }
    std::printf("\nplotted both times against B/X in %s\n", plot.c_str());
  }
  return 0;
}
