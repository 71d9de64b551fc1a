#include "client/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tpuemu {
namespace {

constexpr double kWidth = 860, kHeight = 460;
constexpr double kLeft = 80, kRight = 300, kTop = 60, kBottom = 60;  // margins; the legend sits on the right
const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"};

std::string Escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// One axis's range and the map from values to pixels along it.
struct Scale {
  double lo = 0, hi = 1;
  bool log = false;
  double base = 10;
  double from = 0, to = 1;  // pixels of lo and hi

  double Pos(double v) const {
    const double a = log ? std::log(lo) : lo, b = log ? std::log(hi) : hi;
    const double t = ((log ? std::log(v) : v) - a) / (b - a);
    return from + t * (to - from);
  }
  // Ticks: the base's powers in range (log), or about 5 round steps (linear).
  std::vector<double> Ticks() const {
    std::vector<double> ticks;
    if (log) {
      for (double p = lo; p <= hi * (1 + 1e-9); p *= base) ticks.push_back(p);
      return ticks;
    }
    const double raw = (hi - lo) / 5, mag = std::pow(10, std::floor(std::log10(raw)));
    const double step = raw / mag < 2 ? 2 * mag : raw / mag < 5 ? 5 * mag : 10 * mag;
    for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) ticks.push_back(v);
    return ticks;
  }
};

Scale ScaleOf(const Chart& chart, bool x_axis, double from, double to) {
  Scale s;
  const PlotAxis& axis = x_axis ? chart.x : chart.y;
  s.log = axis.log;
  s.base = axis.log_base;
  s.from = from;
  s.to = to;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const PlotSeries& series : chart.series) {
    for (const auto& [x, y] : series.points) {
      const double v = x_axis ? x : y;
      if (s.log && v <= 0) continue;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  if (!std::isfinite(lo)) lo = s.log ? 1 : 0, hi = s.log ? 10 : 1;
  if (s.log) {
    // Out to the base's powers around the data (a small margin keeps a point off the frame).
    lo = std::pow(s.base, std::floor(std::log(lo) / std::log(s.base) + 1e-9));
    hi = std::pow(s.base, std::ceil(std::log(hi) / std::log(s.base) - 1e-9));
    if (hi <= lo) hi = lo * s.base;
  } else {
    if (!x_axis) lo = std::min(lo, 0.0);  // values from zero, so heights compare
    if (hi <= lo) hi = lo + 1;
    hi += (hi - lo) * 0.05;
  }
  s.lo = lo;
  s.hi = hi;
  return s;
}

std::string Label(const PlotAxis& axis, double v) {
  return axis.format ? axis.format(v) : absl::StrFormat("%.4g", v);
}

}  // namespace

std::string RenderSvg(const Chart& chart) {
  const double plot_right = kWidth - kRight, plot_bottom = kHeight - kBottom;
  const Scale xs = ScaleOf(chart, true, kLeft, plot_right), ys = ScaleOf(chart, false, plot_bottom, kTop);
  std::string out = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" viewBox=\"0 0 %g %g\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
      kWidth, kHeight, kWidth, kHeight);
  absl::StrAppend(&out, "<text class=\"title\" x=\"", kLeft, "\" y=\"24\" font-size=\"15\">", Escaped(chart.title),
                  "</text>\n<text class=\"subtitle\" x=\"", kLeft, "\" y=\"44\" fill=\"#555\">",
                  Escaped(chart.subtitle), "</text>\n");
  // Axes, grid and ticks.
  absl::StrAppend(&out, "<g class=\"axis x\" data-label=\"", Escaped(chart.x.label), "\">\n");
  for (double t : xs.Ticks()) {
    const double px = xs.Pos(t);
    absl::StrAppend(&out, absl::StrFormat("<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\" stroke=\"#ddd\"/>"
                                          "<text class=\"tick\" x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%s</text>\n",
                                          px, kTop, px, plot_bottom, px, plot_bottom + 16, Escaped(Label(chart.x, t))));
  }
  absl::StrAppend(&out, absl::StrFormat("<text class=\"label\" x=\"%g\" y=\"%g\" text-anchor=\"middle\">%s</text>\n",
                                        (kLeft + plot_right) / 2, kHeight - 18, Escaped(chart.x.label)),
                  "</g>\n<g class=\"axis y\" data-label=\"", Escaped(chart.y.label), "\">\n");
  for (double t : ys.Ticks()) {
    const double py = ys.Pos(t);
    absl::StrAppend(&out, absl::StrFormat("<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#ddd\"/>"
                                          "<text class=\"tick\" x=\"%g\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                                          kLeft, py, plot_right, py, kLeft - 6, py + 4, Escaped(Label(chart.y, t))));
  }
  absl::StrAppend(&out,
                  absl::StrFormat("<text class=\"label\" transform=\"translate(18,%g) rotate(-90)\" "
                                  "text-anchor=\"middle\">%s</text>\n",
                                  (kTop + plot_bottom) / 2, Escaped(chart.y.label)),
                  "</g>\n",
                  absl::StrFormat("<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"#444\"/>\n",
                                  kLeft, kTop, plot_right - kLeft, plot_bottom - kTop));
  // Series and legend.
  for (size_t i = 0; i < chart.series.size(); ++i) {
    const PlotSeries& s = chart.series[i];
    const char* colour = kColours[i % std::size(kColours)];
    absl::StrAppend(&out, "<g class=\"series\" data-series=\"", Escaped(s.name), "\">\n");
    std::string points;
    std::string dots;
    for (const auto& [x, y] : s.points) {
      if ((xs.log && x <= 0) || (ys.log && y <= 0)) continue;  // no place on a log axis
      absl::StrAppend(&points, absl::StrFormat("%.1f,%.1f ", xs.Pos(x), ys.Pos(y)));
      absl::StrAppend(&dots, absl::StrFormat("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\" data-x=\"%.17g\" "
                                             "data-y=\"%.17g\"/>\n",
                                             xs.Pos(x), ys.Pos(y), colour, x, y));
    }
    if (!points.empty()) {
      absl::StrAppend(&out, "<polyline fill=\"none\" stroke=\"", colour, "\" stroke-width=\"2\"",
                      s.dashed ? " stroke-dasharray=\"6,4\"" : "", " points=\"", points, "\"/>\n", dots);
    }
    const double ly = kTop + 10 + 20 * static_cast<double>(i);
    absl::StrAppend(&out,
                    absl::StrFormat("<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"%s\" stroke-width=\"2\"%s/>"
                                    "<text class=\"legend\" x=\"%g\" y=\"%g\">%s</text>\n",
                                    plot_right + 12, ly, plot_right + 36, ly, colour,
                                    s.dashed ? " stroke-dasharray=\"6,4\"" : "", plot_right + 42, ly + 4,
                                    Escaped(s.name)),
                    "</g>\n");
  }
  out += "</svg>\n";
  return out;
}

}  // namespace tpuemu
