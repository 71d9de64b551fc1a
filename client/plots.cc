#include "client/plots.h"

#include <cstdio>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "client/cli_checks.h"
#include "client/cli_errors.h"
#include "client/png_render.h"
#include "client/coordinator_client.h"
#include "client/pod_state.h"
#include "core/base/output_file.h"
#include "core/base/units.h"

namespace tpuemu {

Chart CollectiveSweepChart(const std::vector<v1::Job>& jobs) {
  Chart chart;
  const v1::CollectiveResult& first = jobs.front().result();
  chart.title = absl::StrCat(first.op(), " over ", first.axes(), ": bus bandwidth on the emulated clock");
  chart.subtitle = absl::StrCat(first.n(), " chips, algorithm ", first.algorithm());
  chart.x = {"V, the array (bytes)", true, 4, [](double v) { return FormatBytes(static_cast<uint64_t>(v)); }};
  chart.y = {"bus bandwidth (GB/s, emulated clock)", false, 10, nullptr};
  PlotSeries emulated{"emulated", {}, false}, predicted{"closed form (predicted_s)", {}, true},
      seed{"seed's rule of thumb", {}, true};
  for (const v1::Job& job : jobs) {
    const v1::CollectiveResult& r = job.result();
    const double v = static_cast<double>(r.bytes());
    // Bus bandwidth is inversely proportional to time: a prediction's is the emulated one x ratio.
    emulated.points.emplace_back(v, r.emulated_busbw_gbps());
    predicted.points.emplace_back(v, r.emulated_busbw_gbps() * r.ratio());
    if (r.seed_formula_s() > 0) seed.points.emplace_back(v, r.emulated_busbw_gbps() * r.seed_ratio());
  }
  chart.series = {emulated, predicted};
  if (!seed.points.empty()) chart.series.push_back(seed);
  return chart;
}

Chart TrainStepsChart(const v1::Job& job) {
  Chart chart;
  chart.title = absl::StrCat(job.id(), ": where each step's time went");
  chart.subtitle = absl::StrCat("mesh ", job.train_summary().mesh());
  chart.x = {"step", false, 10, [](double v) { return absl::StrCat(static_cast<int64_t>(v)); }};
  chart.y = {"emulated time (us)", false, 10, nullptr};
  PlotSeries step{"emulated step", {}, false}, compute{"compute", {}, false};
  std::map<std::string, PlotSeries> exposed;  // by mesh axis, those that wait at all
  for (const v1::TrainStep& s : job.steps()) {
    step.points.emplace_back(s.step(), s.emulated_step_s() * 1e6);
    compute.points.emplace_back(s.step(), s.compute_s() * 1e6);
    for (const auto& [axis, seconds] : s.exposed_comm_s()) {
      PlotSeries& series = exposed[axis];
      series.name = absl::StrCat("exposed ", axis, " communication");
      series.points.emplace_back(s.step(), seconds * 1e6);
    }
  }
  chart.series = {step, compute};
  for (auto& [axis, series] : exposed) {
    bool waits = false;
    for (const auto& [x, y] : series.points) waits = waits || y > 0;
    if (waits) chart.series.push_back(series);
  }
  return chart;
}

namespace {
// A chart's format, from its file's name (.png, or .svg; either case).
bool IsPng(const std::string& path) { return absl::EndsWithIgnoreCase(path, ".png"); }
}  // namespace

absl::Status CheckChartPath(const std::string& flag, const std::string& path) {
  if (!absl::EndsWithIgnoreCase(path, ".svg") && !IsPng(path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", path, ": a chart is written as SVG or PNG, chosen by the name's end: give FILE.svg or FILE.png"));
  }
  return CheckOutputFile(flag, path);
}

absl::Status WriteChart(const Chart& chart, const std::string& path) {
  if (auto s = CheckChartPath("the chart's file", path); !s.ok()) return s;
  std::string bytes = RenderSvg(chart);
  if (IsPng(path)) {
    auto png = RenderPng(bytes);
    if (!png.ok()) return png.status();
    bytes = *std::move(png);
  }
  auto file = OutputFile::Open("the chart's file", path);
  if (!file.ok()) return file.status();
  (*file)->stream() << bytes;
  return (*file)->Commit();
}

namespace {

struct PlotOptions {
  std::string id, output, coordinator;
};

int Plot(const PlotOptions& o) {
  if (auto s = CheckChartPath("-o", o.output); !s.ok()) return Fail(s);
  auto address = ResolveCoordinator(o.coordinator);
  if (!address.ok()) return Fail(address.status());
  auto job = CoordinatorClient(*address).Get(o.id);
  if (!job.ok()) return Fail(job.status());
  if (!job->has_train()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        o.id, " is not a training job: plot a collective sweep with `tpuemu bench collective ... --plot FILE`")));
  }
  if (job->steps_size() == 0) {
    const bool may_yet = job->state() == v1::JOB_STATE_PENDING || job->state() == v1::JOB_STATE_RUNNING;
    return Fail(absl::FailedPreconditionError(
        may_yet ? absl::StrCat(o.id, " has no finished step yet; try again once it has")
                : absl::StrCat(o.id, " ended with no finished step: nothing to plot (`tpuemu status ", o.id,
                               "` says why)")));
  }
  if (auto s = WriteChart(TrainStepsChart(*job), o.output); !s.ok()) return Fail(s);
  std::printf("wrote %s: %d step%s of %s\n", o.output.c_str(), job->steps_size(), job->steps_size() == 1 ? "" : "s",
              o.id.c_str());
  return 0;
}

}  // namespace

void AddPlotCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<PlotOptions>();
  auto* plot = app.add_subcommand(
      "plot",
      "draw a training job's steps as a chart (SVG, or PNG when the file ends in .png): emulated step time,\n"
      "compute and exposed communication by mesh axis, step by step. Examples:\n"
      "  tpuemu plot job-3 -o steps.svg\n"
      "  tpuemu plot job-3 -o steps.png\n"
      "A collective sweep: tpuemu bench collective --op all-gather --axes x --bytes 64KiB,1MiB,16MiB --plot bw.svg");
  plot->add_option("job", o->id, "job id, e.g. job-3 (or 3)")->required()->transform(JobId());
  plot->add_option("-o,--output", o->output, "the file to write: FILE.svg or FILE.png")->required();
  plot->add_option("--coordinator", o->coordinator,
                   "coordinator HOST:PORT (default: $TPUEMU_COORDINATOR, else the pod `cluster up` started)");
  plot->callback([o, exit_code] { *exit_code = Plot(*o); });
}

}  // namespace tpuemu
