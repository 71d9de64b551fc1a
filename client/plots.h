// tpuemu's plots (issue 20): what a bench sweep or a training job's steps
// look like, as SVG charts (client/svg_plot.h), and `tpuemu plot`.
#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "client/svg_plot.h"
#include "tpuemu/v1/coordinator.pb.h"

namespace tpuemu {

// A collective sweep (one job per size): bus bandwidth on the emulated clock
// against size, beside the closed form's and the seed's rule's.
Chart CollectiveSweepChart(const std::vector<v1::Job>& jobs);
// A training job's steps: emulated step time, compute and exposed
// communication by mesh axis, step by step.
Chart TrainStepsChart(const v1::Job& job);
// OK when `path` names a chart file (.svg or .png); else an error naming `flag`.
absl::Status CheckChartPath(const std::string& flag, const std::string& path);
// Writes `chart` to `path` whole (a temporary file renamed into place), as
// SVG, or as PNG when the path ends in .png.
absl::Status WriteChart(const Chart& chart, const std::string& path);

// tpuemu plot JOB -o FILE.svg
void AddPlotCommand(CLI::App& app, int* exit_code);

}  // namespace tpuemu
