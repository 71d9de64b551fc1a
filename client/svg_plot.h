// Line charts as standalone SVG (issue 20's plots): a few series of (x, y)
// points on linear or logarithmic axes, with ticks, axis labels and a
// legend. Every series is a <g class="series" data-series="NAME"> holding
// its polyline and one <circle> per point, so tests and scripts find them.
// No fonts, scripts or links to anything outside the file.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tpuemu {

struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), in order of x
  bool dashed = false;                           // a formula beside measurements
};

struct PlotAxis {
  std::string label;
  bool log = false;  // logarithmic; values <= 0 are not drawn
  double log_base = 10;  // ticks at its powers (4 for sizes in bytes: 64KiB, 256KiB, 1MiB)
  // Tick labels: the value as text (default: up to 4 significant digits).
  std::function<std::string(double)> format;
};

struct Chart {
  std::string title;
  std::string subtitle;
  PlotAxis x, y;
  std::vector<PlotSeries> series;
};

// The chart as an SVG document; empty series are drawn as legend entries only.
std::string RenderSvg(const Chart& chart);

}  // namespace tpuemu
