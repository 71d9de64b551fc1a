#include "client/bench_commands.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_format.h"
#include "client/cli_checks.h"
#include "client/cli_errors.h"
#include "client/coordinator_client.h"
#include "client/pod_state.h"
#include "views/job_json.h"
#include "client/job_wait.h"
#include "client/plots.h"
#include "core/pod/faults.h"
#include "views/worker_memory.h"
#include "core/collective/spec.h"
#include "core/base/units.h"
#include "nlohmann/json.hpp"
#include "services/proto_conv.h"

namespace tpuemu {
namespace {

struct BenchOptions {
  std::string op;
  std::string axes;
  std::string bytes;
  std::string algorithm = "auto";
  std::string dtype = "bf16";
  uint64_t seed = 1;
  std::string chunk = "1MiB";
  std::string coordinator;
  std::string plot;  // a chart of the sweep (.svg or .png), if given
  int num_slices = 0;
  std::vector<std::string> slow_links, stragglers, down_links;  // faults on purpose (core/pod/faults.h)
  std::string on_down_link = "fail";
  bool json = false;
};

// Rounded to 0.1 us (a cast cut 11.29999 to 11.2, and turned infinity into -9.2e17).
std::string Micros(double s) { return absl::StrCat(std::isfinite(s) ? std::round(s * 1e7) / 10.0 : s * 1e6); }

int Bench(const BenchOptions& o) {
  auto op = ParseOp(o.op);
  if (!op.ok()) return Fail(op.status());
  auto axes = ParseAxes(o.axes);
  if (!axes.ok()) return Fail(axes.status());
  auto alg = ParseAlgorithm(o.algorithm);
  if (!alg.ok()) return Fail(alg.status());
  auto sizes = ParseByteList(o.bytes, "--bytes");
  if (!sizes.ok()) return Fail(sizes.status());
  auto chunk = ParseBytes(o.chunk, "--chunk");
  if (!chunk.ok()) return Fail(chunk.status());
  if (o.dtype != "bf16" && o.dtype != "f32") {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--dtype '", o.dtype, "': allowed: bf16, f32")));
  }
  if (!o.plot.empty()) {
    if (auto s = CheckChartPath("--plot", o.plot); !s.ok()) return Fail(s);
  }
  auto parsed = ParseFaultFlags(o.slow_links, o.stragglers, o.down_links);
  if (!parsed.ok()) return Fail(parsed.status());
  Faults faults = *std::move(parsed);
  if (auto s = ParseOnDownLink(o.on_down_link, "--on-down-link", &faults.route_around); !s.ok()) return Fail(s);
  auto address = ResolveCoordinator(o.coordinator);
  if (!address.ok()) return Fail(address.status());
  CoordinatorClient client(*address);

  std::vector<v1::Job> done;
  bool all_good = true;
  for (uint64_t bytes : *sizes) {
    CollectiveSpec spec;
    spec.op = *op;
    spec.axes = *axes;
    spec.algorithm = *alg;
    spec.bytes = bytes;
    spec.dtype_bytes = o.dtype == "bf16" ? 2 : 4;
    spec.seed = o.seed;
    spec.chunk_bytes = *chunk;
    spec.num_slices = o.num_slices;
    spec.faults = faults;
    v1::SubmitJobRequest req;
    *req.mutable_collective() = ToProto(spec);
    auto job = RunJob(client, req, absl::StrCat(o.op, " of ", FormatBytes(bytes), " over ", o.axes));
    if (!job.ok()) return Fail(job.status());
    all_good = all_good && job->result().correct();
    done.push_back(*job);
  }

  if (!o.plot.empty()) {
    if (auto s = WriteChart(CollectiveSweepChart(done), o.plot); !s.ok()) return Fail(s);
    if (!o.json) std::printf("plotted bus bandwidth against size in %s\n", o.plot.c_str());
  }
  if (o.json) {
    nlohmann::json results = nlohmann::json::array();
    for (const auto& job : done) results.push_back(CollectiveJson(job));
    std::cout << nlohmann::json{{"results", results}}.dump(2) << "\n";
  } else {
    int axes_width = 5;       // "x,y,dcn" takes 7
    int algorithm_width = 9;  // "uni-ring going -" (routed round a down link) takes 16
    for (const auto& job : done) {
      axes_width = std::max(axes_width, static_cast<int>(job.result().axes().size()));
      algorithm_width = std::max(algorithm_width, static_cast<int>(job.result().algorithm().size()));
    }
    std::printf("%-14s %-*s %3s %9s %-*s %12s %12s %7s %9s %7s %10s %9s %9s %8s %11s\n", "op", axes_width, "axes", "n",
                "bytes", algorithm_width, "algorithm", "emulated_us", "predicted_us", "ratio", "seed_us", "seed_r", "wall_ms", "algbw", "busbw",
                "correct", "peak_MiB");
    for (const auto& job : done) {
      const auto& r = job.result();
      const bool seed = r.seed_formula_s() > 0;
      std::printf("%-14s %-*s %3d %9s %-*s %12s %12s %7.4f %9s %7s %10.2f %9.3f %9.3f %8s %11s\n", r.op().c_str(),
                  axes_width, r.axes().c_str(), r.n(), FormatBytes(r.bytes()).c_str(), algorithm_width,
                  r.algorithm().c_str(),
                  Micros(r.emulated_s()).c_str(), Micros(r.predicted_s()).c_str(), r.ratio(),
                  seed ? Micros(r.seed_formula_s()).c_str() : "-",
                  seed ? absl::StrFormat("%.4f", r.seed_ratio()).c_str() : "-", r.wall_s() * 1e3, r.algbw_gbps(),
                  r.busbw_gbps(), r.correct() ? "yes" : "NO", WorkerMemoryCell(job).c_str());
    }
    if (!done.empty() && done.front().result().faults_size() > 0) {
      // A routed collective is predicted as the one-way ring that ran, so its
      // ratio leaves out what going round cost.
      const bool routed = absl::StrContains(done.front().result().algorithm(), "going");
      std::printf("\nfaults and contention: %s (predicted_us and seed_us are for healthy links%s: ratio is what %s)\n",
                  absl::StrJoin(done.front().result().faults(), "; ").c_str(),
                  routed ? ", as the one-way ring that ran" : "",
                  routed ? "slow links and stragglers cost; the route's own cost shows against the same op without "
                           "the down link"
                         : "they cost");
    }
    std::printf("\npredicted: the closed form of the algorithm run (its busiest link's bytes over the link's\n"
                "bandwidth plus a hop, or its chain of hops if longer, with a reduction's adds; within 2%% on\n"
                "one ring; over several axes within about a fifth either way: high where hops dominate, low where\n"
                "an axis's phase waits for the chunks the one before delivers (lines, 1-4 MiB) or for a\n"
                "reduction's adds: docs/collectives.md);\n"
                "ratio = emulated / predicted. seed_us: the seed's rule of thumb for the same case\n"
                "(V / W_bidir on a ring, dropping (N-1)/N; (N-1) V / (N W) on a line or one-way ring; the axes'\n"
                "bandwidths added over several; twice for all-reduce, a quarter for all-to-all), seed_r =\n"
                "emulated / seed_us, '-' where the seeds give no rule. algbw/busbw: GB/s on the wall clock for\n"
                "the host's f32 array (nccl-tests definitions). peak_MiB: the largest worker's resident memory\n"
                "at its peak during the job (workers give it back once idle for --keep-memory-for, 30 s by\n"
                "default). --json adds per-link bytes and every worker's memory.\n");
  }
  return all_good ? 0 : 1;
}

}  // namespace

void AddBenchCommands(CLI::App& app, int* exit_code) {
  auto* bench = app.add_subcommand("bench", "run benchmarks on the pod");
  bench->require_subcommand(1);
  auto o = std::make_shared<BenchOptions>();
  auto* c = bench->add_subcommand(
      "collective",
      "run a collective on the pod with real data, one job per size, and compare its emulated time with\n"
      "the seeds' closed form. Example:\n"
      "  tpuemu bench collective --op all-gather --axes x --bytes 1MiB,8MiB,64MiB\n"
      "  tpuemu bench collective --op all-reduce --axes x,dcn --bytes 8MiB --json");
  c->add_option("--op", o->op, "all-gather | reduce-scatter | all-reduce | all-to-all")->required();
  c->add_option("--axes", o->axes,
                "mesh axes to run over, comma-separated: x, y, z, dcn. Several ICI axes run at once\n"
                "(the seed's multi-axis speed-up); with dcn an all-reduce is hierarchical")
      ->required();
  c->add_option("--bytes", o->bytes, "V, the full array in emulated bytes, e.g. 64KiB or 1MiB,8MiB,64MiB")
      ->required();
  c->add_option("--algorithm", o->algorithm,
                "auto (bi-ring on a wraparound axis, line otherwise) | uni-ring | bi-ring | line")
      ->capture_default_str();
  c->add_option("--dtype", o->dtype, "emulated element type: bf16 (2 bytes) or f32; host buffers are f32")
      ->capture_default_str();
  c->add_option("--seed", o->seed, "seed of the deterministic inputs")->check(WholeNumber64())->capture_default_str();
  c->add_option("--chunk", o->chunk,
                absl::StrCat("wire chunk size (host bytes), a multiple of 4 from 1KiB to ", FormatBytes(kMaxChunkBytes)))
      ->capture_default_str();
  c->add_option("--slow-link", o->slow_links,
                "a slow link on purpose (repeatable): LINKS@FRACTION[+LATENCY][ from STEP], e.g. x@0.5 (every\n"
                "x link at half its bandwidth), x+@1+2us (x+ links 2 us later per hop), '0->1 x+@0.25'.\n"
                "Both clocks obey it; docs/faults.md");
  c->add_option("--straggler", o->stragglers,
                "a chip whose compute (the reductions' adds) runs slower (repeatable): CHIP@FACTOR, e.g. 3@2");
  c->add_option("--down-link", o->down_links,
                "a link that carries nothing (repeatable): SRC->DST AXIS+|-, e.g. '0->1 x+'. A collective that\n"
                "needs it fails, naming it, unless --on-down-link route");
  c->add_option("--on-down-link", o->on_down_link,
                "fail | route: with route, an axis whose ring wraps runs its one-way ring the other way round\n"
                "(every phase against the down link), so the collective completes at the one-way ring's time")
      ->capture_default_str();
  c->add_option("--num-slices", o->num_slices,
                "run on this many of the pod's slices (the lowest free ones), beside jobs on the others;\n"
                "0, the default, takes the whole pod")
      ->capture_default_str();
  c->add_option("--coordinator", o->coordinator, "coordinator HOST:PORT (default: $TPUEMU_COORDINATOR, "
                                                 "else the pod `cluster up` started)");
  c->add_flag("--json", o->json, "print {\"results\": [...]} for scripts");
  c->add_option("--plot", o->plot,
                "also draw the sweep as a chart in this file (FILE.svg or FILE.png): bus bandwidth on the\n"
                "emulated clock against size, beside the closed form's and the seed's rule's (docs/plots.md)")
      ->check(FileToWrite());
  c->callback([o, exit_code] { *exit_code = Bench(*o); });
}

}  // namespace tpuemu
