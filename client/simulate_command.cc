#include "client/simulate_command.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "client/cli_checks.h"
#include "client/cli_errors.h"
#include "client/job_file.h"
#include "client/progress.h"
#include "core/base/process_memory.h"
#include "core/job/inprocess_pod.h"
#include "core/job/kinds.h"
#include "core/job/symmetric_pod.h"
#include "core/job/record.h"
#include "core/pod/topology.h"
#include "core/train/job.h"
#include "services/job_proto.h"
#include "core/train/report.h"
#include "views/chrome_trace.h"
#include "views/job_json.h"
#include "views/job_views.h"

namespace tpuemu {
namespace {

// A step's spans as a trace piece, `clock_s` after the job's start.
v1::JobTrace StepPiece(int step, double clock_s, const std::vector<ChipRunResult>& chips) {
  v1::JobTrace piece;
  const std::string prefix = absl::StrCat("step ", step, ": ");
  for (const ChipRunResult& chip : chips) {
    for (const TraceEvent& e : chip.trace) {
      v1::TraceEvent* out = piece.add_events();
      out->set_track(e.track);
      out->set_name(prefix + e.name);
      out->set_start_s(clock_s + e.start_s);
      out->set_end_s(clock_s + e.end_s);
      out->set_bytes(e.bytes);
    }
  }
  return piece;
}

struct SimulateOptions {
  std::string path, topology, engine = "auto", trace;
  int slices = 1, chips_per_host = 4;
  bool json = false, chips_per_host_given = false;
};

// The most chips --engine every-chip runs, a thread each (a pod of 32K
// chips ran out of threads).
constexpr int kMaxEveryChip = 4096;

int RunSimulate(const SimulateOptions& o) {
  // The file's keys as they are, its values aside: a real-data job file
  // simulates as its shape.
  auto spec = ReadJobFile(o.path, /*shape_only=*/true);
  if (!spec.ok()) return Fail(spec.status());
  auto topo = Topology::Create({o.topology, o.slices, o.chips_per_host, "auto"});
  if (!topo.ok()) return Fail(SayingTheDefaultChipsPerHost(topo.status(), o.chips_per_host, o.chips_per_host_given));
  // One chip for all where the chips are alike, else every chip.
  const absl::Status alike = CheckOneChipStandsForAll(*spec, *topo);
  const bool one_for_all = o.engine == "one-chip" || (o.engine == "auto" && alike.ok());
  if (o.engine == "one-chip" && !alike.ok()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--engine one-chip: ", alike.message(),
                                                        "; use --engine every-chip (or auto)")));
  }
  const std::string engine = one_for_all ? "one chip for all" : "every chip";
  const std::string why_every_chip =
      one_for_all ? "" : alike.ok() ? "--engine every-chip" : std::string(alike.message());
  if (!one_for_all && topo->num_chips() > kMaxEveryChip) {
    // The job's own refusal first: it is what the user would fix.
    if (auto planned = PlanJob(JobSpec(*spec), *topo, 0); !planned.ok()) {
      return Fail(NamingTheFile(planned.status(), spec->config.name, o.path));
    }
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "--topology ", o.topology, ": ", topo->num_chips(), " chips; every chip runs as a thread of its own (",
        why_every_chip, "), at most ", kMaxEveryChip,
        "; one chip stands for all on a torus that wraps on every axis, with no pipeline and no faults")));
  }
  const auto start = std::chrono::steady_clock::now();
  JobRecord record("sim-1", 1, JobSpec(*spec));
  record.submitted_unix_s = record.started_unix_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  Progress progress(true);
  // Written step by step: a trace of many steps never sits whole in memory.
  std::optional<ChromeTraceFile> trace;
  absl::Status traced = absl::OkStatus();
  double trace_clock_s = 0;
  if (!o.trace.empty()) {
    trace.emplace(o.trace, "--trace");
    if (auto s = trace->Open(); !s.ok()) return Fail(s);
    v1::JobTrace first;
    first.set_id(record.id);
    first.mutable_extent()->set_steps(spec->config.steps);
    first.mutable_extent()->set_last_kept_step(spec->config.steps - 1);
    first.mutable_extent()->set_last_step_read(spec->config.steps - 1);  // every step, from 0
    traced = trace->Add(first);
  }
  auto on_step = [&](int step, const JobReport& report, const std::vector<ChipRunResult>& chips) {
    if (trace && traced.ok()) {
      traced = trace->Add(StepPiece(step, trace_clock_s, chips));
      trace_clock_s += std::any_cast<const StepReport&>(report).emulated_s;
    }
    progress.Update(absl::StrCat(spec->config.name, ": ", step + 1, " of ", spec->config.steps, " steps done on ",
                                 topo->num_chips(), " chips (", engine, ")"));
  };
  progress.Update(absl::StrCat(spec->config.name, ": 0 of ", spec->config.steps, " steps done on ", topo->num_chips(),
                               " chips (", engine, ")"));
  absl::StatusOr<JobRun> run;
  if (one_for_all) {
    run = SymmetricPod(*topo).Run(*spec, on_step);
  } else {
    run = InProcessPod(*topo, 0).Run(record.spec, on_step);
  }
  progress.Done();
  if (!run.ok()) return Fail(NamingTheFile(run.status(), spec->config.name, o.path));
  if (!traced.ok()) return Fail(traced);
  if (trace) {
    if (auto s = trace->Commit(); !s.ok()) return Fail(s);
  }
  record.state = JobState::kSucceeded;
  record.finished_unix_s = record.started_unix_s + std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  record.summary = run->report;
  record.steps.assign(run->steps.begin(), run->steps.end());
  const v1::Job job = ToProto(record);
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double peak_rss = static_cast<double>(PeakResidentBytes());
  if (o.json) {
    nlohmann::json out = JobJson(job);
    out["simulation"] = {{"topology", topo->Describe()},
                         {"chips", topo->num_chips()},
                         {"engine", engine},
                         {"why", why_every_chip},
                         {"wall_s", wall_s},
                         {"peak_rss_bytes", peak_rss}};
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::printf("%s shape-only on %s (%d chips), in this process: %s\n", spec->config.name.c_str(),
              topo->Describe().c_str(), topo->num_chips(),
              one_for_all ? "one chip stands for all (they are alike)"
                          : absl::StrCat("every chip runs (", why_every_chip, ")").c_str());
  for (const v1::TrainStep& step : job.steps()) std::printf("%s\n", StepLine(step).c_str());
  ViewOf(job).print_succeeded(job);
  std::printf("simulated in %.2f s of wall time, %.0f MiB peak resident memory\n", wall_s, peak_rss / (1 << 20));
  if (trace) {
    std::printf("wrote %lld spans to %s (%s); open it in https://ui.perfetto.dev\n",
                static_cast<long long>(trace->writer().spans()), o.trace.c_str(),
                one_for_all ? "the chip that stood for all, and its links" : "every chip and link");
  }
  return 0;
}

}  // namespace

void AddSimulateCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<SimulateOptions>();
  auto* c = app.add_subcommand(
      "simulate", "run a training job shape-only (no values, no multiplies) on an emulated pod in this process");
  c->footer(
      "The job's chips run the same programs over the same links as on a pod, on tensors that have\n"
      "shapes and no values (values: none): every emulated figure (step time, compute, communication\n"
      "by mesh axis, bytes per chip, MFU, the pipeline bubble) is what a real-data run reports, and\n"
      "the loss is none. No pod is needed; memory and time grow with the chips, not the model's\n"
      "size. Prints the steps as `tpuemu submit --wait` does; --json prints the finished job as\n"
      "`submit --wait --json` does, with a \"simulation\" object (wall time, peak memory). Examples:\n"
      "  tpuemu simulate examples/jobs/fsdp_tp.yaml --topology v5p:2x4\n"
      "  tpuemu simulate examples/jobs/dp.yaml --topology v5p:4x4x4 --slices 2 --json\n"
      "--chips-per-host as the pod's (`cluster up`'s): with several slices each host's DCN bandwidth is\n"
      "shared by its chips, so the step's DCN time depends on it.\n"
      "docs/simulate.md");
  c->add_option("job", o->path, "JOB.yaml, the job file (its `values` key is taken as none)")->required();
  c->add_option("--topology", o->topology, "CHIP:SHAPE of each slice, e.g. v5p:4x4x4 or v5e:16x16")->required();
  c->add_option("--slices", o->slices, "slices joined over DCN")
      ->check(CLI::Range(1, kMaxSlices))
      ->capture_default_str();
  c->add_option("--chips-per-host", o->chips_per_host, "chips per host (each host's DCN bandwidth is shared by them)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  c->add_option("--engine", o->engine,
                "one-chip: one chip runs and stands for all, when they are alike (a torus that wraps on every "
                "axis, no pipeline, no faults); every-chip: a thread per chip; auto: one-chip where it can")
      ->check(CLI::IsMember({"auto", "one-chip", "every-chip"}))
      ->capture_default_str();
  c->add_flag("--json", o->json, "print the finished job as JSON, as `submit --wait --json` does");
  c->add_option("--trace", o->trace,
                "write a Chrome / Perfetto trace of every step to FILE: compute, collectives and waits per chip, "
                "a span per collective and link (not per chunk); with one chip for all, that chip's")
      ->check(FileToWrite());
  c->callback([o, c, exit_code] {
    o->chips_per_host_given = c->count("--chips-per-host") > 0;
    *exit_code = RunSimulate(*o);
  });
}

}  // namespace tpuemu
