// The SVG charts behind `tpuemu plot` and `bench collective --plot`
// (client/svg_plot.h): every series and point findable, log ticks at powers
// of ten, text escaped, nothing drawn where a log axis has no place for it.
#include "client/svg_plot.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

using ::testing::HasSubstr;

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(SvgPlotTest, SeriesPointsTicksAndLabelsAreThere) {
  Chart chart;
  chart.title = "all-gather <x>";
  chart.x = {"bytes", true, 10, nullptr};
  chart.y = {"GB/s", false, 10, nullptr};
  chart.series = {{"emulated", {{1e3, 10}, {1e4, 20}, {1e5, 30}}, false},
                  {"closed form & seed", {{1e3, 11}, {1e5, 31}, {0, 5}}, true}};
  const std::string svg = RenderSvg(chart);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_EQ(Count(svg, "<g class=\"series\""), 2);
  EXPECT_THAT(svg, HasSubstr("data-series=\"emulated\""));
  EXPECT_THAT(svg, HasSubstr("data-series=\"closed form &amp; seed\""));
  EXPECT_THAT(svg, HasSubstr("all-gather &lt;x&gt;"));
  EXPECT_EQ(Count(svg, "<circle"), 5);  // x = 0 has no place on a log axis
  EXPECT_EQ(Count(svg, "stroke-dasharray"), 2);  // the dashed series' line and legend
  for (const char* tick : {">1000<", ">1e+04<", ">1e+05<"}) EXPECT_THAT(svg, HasSubstr(tick));
  EXPECT_THAT(svg, HasSubstr("data-x=\"10000\" data-y=\"20\""));
  EXPECT_THAT(svg, HasSubstr("class=\"axis x\" data-label=\"bytes\""));
  EXPECT_THAT(svg, HasSubstr("class=\"axis y\" data-label=\"GB/s\""));
  EXPECT_EQ(svg.find("href"), std::string::npos);  // nothing outside the file
}

TEST(SvgPlotTest, LogTicksFallOnTheBasesPowersAroundTheData) {
  Chart chart;
  chart.x = {"bytes", true, 4, [](double v) { return std::to_string(static_cast<int64_t>(v)); }};
  chart.series = {{"s", {{65536, 1}, {16 << 20, 2}}, false}};
  const std::string svg = RenderSvg(chart);
  EXPECT_EQ(Count(svg, "class=\"tick\" x="), 5 + Count(svg, "text-anchor=\"end\">"));  // x ticks, then y's
  for (const char* tick : {">65536<", ">262144<", ">1048576<", ">4194304<", ">16777216<"}) {
    EXPECT_THAT(svg, HasSubstr(tick));
  }
  EXPECT_THAT(svg, ::testing::Not(HasSubstr(">16384<")));
  EXPECT_THAT(svg, ::testing::Not(HasSubstr(">67108864<")));
}

TEST(SvgPlotTest, AnEmptyChartIsStillADocument) {
  Chart chart;
  chart.series = {{"nothing yet", {}, false}};
  const std::string svg = RenderSvg(chart);
  EXPECT_THAT(svg, HasSubstr("data-series=\"nothing yet\""));
  EXPECT_EQ(Count(svg, "<polyline"), 0);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
}

}  // namespace
}  // namespace tpuemu
