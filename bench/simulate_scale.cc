// Shape-only steps as the pod grows (issue 19): a LLaMA-3-70B-shaped model
// (80 blocks of causal attention and a gated MLP; D = 8960, LLaMA-3 70B's
// 8192 rounded up to a multiple of 560 so that FSDP over 560 chips splits it;
// F = 28672; 16 key-value heads, LLaMA's 8 doubled so that TP over 16 splits
// them) with FSDP x TP, one 8192-token sequence per FSDP shard, on v5p slices
// from 64 to 8960 chips (16x20x28, a full pod): wall time and peak memory of
// one step with one chip standing for all (core/job/symmetric_pod.h), and
// with every chip a thread up to a size; then wall time per emulated chip of
// a small job with real values on 32 chips against shape-only runs of it.
//   build/bin/simulate_scale [--plot FILE.svg|FILE.png] [every-chip up to N chips (default 128)]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_args.h"
#include "bench/machine.h"
#include "bench/plot_flag.h"
#include "client/plots.h"
#include "core/base/process_memory.h"
#include "core/base/units.h"
#include "core/job/inprocess_pod.h"
#include "core/job/symmetric_pod.h"
#include "core/train/job.h"
#include "core/train/report.h"

namespace tpuemu {
namespace {

struct Run {
  double wall_s = 0;
  double peak_bytes = 0;
  StepReport step;
};

// One step of `yaml` on `topology`: with one chip for all, or every chip.
Run Step(const std::string& topology, const std::string& yaml, bool one_chip) {
  auto topo = Topology::Create({topology, 1, 4, "auto"});
  auto spec = ParseTrainSpec(yaml, "bench");
  if (!topo.ok() || !spec.ok()) {
    std::fprintf(stderr, "bad point %s: %s\n", topology.c_str(),
                 std::string((!topo.ok() ? topo.status() : spec.status()).message()).c_str());
    std::exit(1);
  }
  ReleaseFreedMemory();
  ResetPeakResident();
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<JobRun> run =
      one_chip ? SymmetricPod(*topo).Run(*spec) : InProcessPod(*topo, 0).Run(JobSpec(*spec));
  Run r;
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.peak_bytes = static_cast<double>(PeakResidentBytes());
  if (!run.ok()) {
    std::fprintf(stderr, "%s: %s\n", topology.c_str(), std::string(run.status().message()).c_str());
    std::exit(1);
  }
  r.step = std::any_cast<StepReport>(run->steps.front());
  return r;
}

struct Slice {
  const char* shape;
  int chips, tensor, fsdp;  // tensor over x, fsdp over y and z
};
constexpr Slice kSlices[] = {{"4x4x4", 64, 4, 16},        {"4x4x8", 128, 4, 32},      {"4x8x8", 256, 4, 64},
                             {"8x8x8", 512, 8, 64},       {"8x8x16", 1024, 8, 128},   {"8x16x16", 2048, 8, 256},
                             {"16x16x16", 4096, 16, 256}, {"16x20x28", 8960, 16, 560}};

// LLaMA-3 70B's block but for D (8960, not 8192: 560 FSDP ways split it)
// and its key-value heads (16, not 8: the tensor axis splits whole heads, and
// the pods here have no axis of 8 chips at the top): its 128,256-token
// vocabulary (embedding and projection), causal attention, a gated MLP, full
// remat; one 8192-token sequence per FSDP shard.
std::string BigBlock(const Slice& s) {
  return absl::StrCat("name: llama3-70b-block\nvalues: none\nemb_dim: 8960\nmlp_dim: 28672\nnum_layers: 80\n",
                      "mlp_activations: [silu, linear]\nbase_num_query_heads: 64\nbase_num_kv_heads: 16\n",
                      "head_dim: 128\nmax_target_length: 8192\nremat_policy: full\nvocab_size: 128256\n",
                      "ici_tensor_parallelism: ", s.tensor, "\nici_fsdp_parallelism: ", s.fsdp,
                      "\nglobal_batch_tokens: ", int64_t{8192} * s.fsdp, "\n");
}

// The small job of the last table: D 1024, F 4096, 4 layers, 8192 tokens,
// FSDP x TP over the chips.
std::string SmallJob(int tensor, int fsdp, bool values) {
  return absl::StrCat("name: small\nvalues: ", values ? "real" : "none",
                      "\nemb_dim: 1024\nmlp_dim: 4096\nnum_layers: 4\nglobal_batch_tokens: 8192\n",
                      "ici_tensor_parallelism: ", tensor, "\nici_fsdp_parallelism: ", fsdp, "\n");
}

int Main(int argc, char** argv) {
  const std::string plot = TakePlotFlag(argc, argv);
  const BenchArgs args(argc, argv,
                       "simulate_scale [--plot FILE.svg|FILE.png] [N]\n"
                       "  one shape-only step of a LLaMA-3-70B-shaped model from 64 to 8960 chips, one chip standing\n"
                       "  for all, and with every chip a thread up to N chips (0 to 8960, default 128)",
                       1);
  const int every_chip_up_to = static_cast<int>(args.Whole(1, "N", 128, 0, 8960));
  PrintMachine();
  std::printf("One shape-only step of a LLaMA-3-70B-shaped model (a 128,256-token vocabulary's embedding and "
              "projection around 80 layers of causal attention, 64 query heads of "
              "128 and 16 key-value heads, then a gated MLP; D 8960, F 28672; bf16, Adam, full remat), FSDP x TP, one "
              "8192-token sequence per FSDP shard; wall time and peak resident memory of this process.\n\n");
  std::printf("%-10s %6s %-22s %10s %7s %7s %10s %10s | %10s %10s\n", "v5p", "chips", "mesh", "step (emu)", "MFU",
              "", "one chip", "memory", "every chip", "memory");
  PlotSeries one_wall{"one chip for all: wall time (s)", {}, false}, one_mem{"one chip for all: peak memory (GiB)", {}, true},
      every_wall{"every chip: wall time (s)", {}, false}, every_mem{"every chip: peak memory (GiB)", {}, true};
  for (const Slice& s : kSlices) {
    const std::string topology = absl::StrCat("v5p:", s.shape);
    const Run one = Step(topology, BigBlock(s), true);
    std::printf("%-10s %6d %-22s %10s %6.1f%% %7s %9.2fs %7.0f MiB |", s.shape, s.chips,
                absl::StrCat("fsdp y,z ", s.fsdp, " tensor x ", s.tensor).c_str(),
                FormatSeconds(one.step.emulated_s).c_str(), 100 * one.step.mfu, "", one.wall_s,
                one.peak_bytes / (1 << 20));
    one_wall.points.push_back({static_cast<double>(s.chips), one.wall_s});
    one_mem.points.push_back({static_cast<double>(s.chips), one.peak_bytes / (1 << 30)});
    if (s.chips <= every_chip_up_to) {
      const Run every = Step(topology, BigBlock(s), false);
      std::printf(" %9.2fs %6.0f MiB%s\n", every.wall_s, every.peak_bytes / (1 << 20),
                  every.step.emulated_s == one.step.emulated_s ? "" : "  (step time differs!)");
      every_wall.points.push_back({static_cast<double>(s.chips), every.wall_s});
      every_mem.points.push_back({static_cast<double>(s.chips), every.peak_bytes / (1 << 30)});
    } else {
      std::printf(" %10s\n", "-");
    }
    std::fflush(stdout);
  }

  std::printf("\nWall time per emulated chip of a one-step job (prepare, step, check) of a small model (D 1024, F "
              "4096, 4 layers, 8192 tokens, FSDP x TP):\n\n");
  std::printf("%-34s %6s %10s %16s %9s\n", "run", "chips", "wall", "wall per chip", "speed-up");
  const Run real = Step("v5p:4x4x2", SmallJob(4, 8, true), false);
  const double real_per_chip = real.wall_s / 32;
  auto row = [&](const char* what, int chips, const Run& r) {
    std::printf("%-34s %6d %9.3fs %14.3f ms %8.0fx\n", what, chips, r.wall_s, 1e3 * r.wall_s / chips,
                real_per_chip / (r.wall_s / chips));
  };
  row("real values, every chip (v5p:4x4x2)", 32, real);
  row("shape-only, every chip (v5p:4x4x2)", 32, Step("v5p:4x4x2", SmallJob(4, 8, false), false));
  row("shape-only, one chip (v5p:16x16x16)", 4096, Step("v5p:16x16x16", SmallJob(16, 256, false), true));

  if (!plot.empty()) {
    Chart chart;
    chart.title = "A shape-only step of a LLaMA-3-70B-shaped model, 64 to 8960 chips";
    chart.subtitle = "wall time and peak memory on a 2-core host; one chip standing for all, or a thread per chip";
    chart.x = {"emulated v5p chips", true, 2, nullptr};
    chart.y = {"wall time (s) / peak memory (GiB)", true, 10, nullptr};
    chart.series = {one_wall, one_mem, every_wall, every_mem};
    if (auto s = WriteChart(chart, plot); !s.ok()) {
      std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
      return 1;
    }
    std::printf("\nplotted wall time and memory against chips in %s\n", plot.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace tpuemu

int main(int argc, char** argv) { return tpuemu::Main(argc, argv); }
