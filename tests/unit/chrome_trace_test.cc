// A Chrome/Perfetto trace puts complete events of one thread in a stack:
// each either holds the next or ends before it starts. A chip's collective
// issued ahead runs beside its compute, overlapping without nesting: the
// writer gives it another lane of the chip's track.
#include "views/chrome_trace.h"

#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tpuemu {
namespace {

void AddSpan(v1::JobTrace& piece, const std::string& track, const std::string& name, double start_us, double end_us) {
  v1::TraceEvent* e = piece.add_events();
  e->set_track(track);
  e->set_name(name);
  e->set_start_s(start_us * 1e-6);
  e->set_end_s(end_us * 1e-6);
}

TEST(ChromeTraceTest, SpansOverlappingWithoutNestingGoToAnotherLaneAndEveryThreadNests) {
  v1::JobTrace piece;
  piece.set_id("job-1");
  piece.mutable_extent()->set_first_step_read(4);
  piece.mutable_extent()->set_last_step_read(4);
  // By start, the enclosing span first (a step clock's order).
  AddSpan(piece, "chip 0", "backward", 0, 10);
  AddSpan(piece, "chip 0", "matmul", 0, 4);
  AddSpan(piece, "chip 0", "all-reduce data (ahead)", 3, 12);  // overlaps both
  AddSpan(piece, "chip 0", "all-reduce data (ahead)", 5, 14);  // and the first ahead
  AddSpan(piece, "chip 0", "matmul", 4, 10);
  AddSpan(piece, "chip 0", "adam", 14, 15);
  AddSpan(piece, "link 0->1 x+", "chunk", 3, 6);
  std::ostringstream out;
  ChromeTraceWriter writer(out);
  writer.Add(piece);
  writer.Finish();
  const nlohmann::json trace = nlohmann::json::parse(out.str());

  std::map<std::pair<int, int>, std::string> threads;
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> spans;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (!e.contains("tid")) continue;  // a process's name
    const std::pair<int, int> thread{e["pid"].get<int>(), e["tid"].get<int>()};
    if (e["ph"] == "M" && e["name"] == "thread_name") threads[thread] = e["args"]["name"].get<std::string>();
    const double ts = e.value("ts", 0.0);
    if (e["ph"] == "X") spans[thread].emplace_back(ts, ts + e["dur"].get<double>());
  }
  std::vector<std::string> names;
  for (const auto& [_, name] : threads) names.push_back(name);
  EXPECT_THAT(names, testing::UnorderedElementsAre("chip 0", "chip 0, lane 2", "chip 0, lane 3", "link 0->1 x+"));
  for (const auto& [thread, list] : spans) {
    std::vector<double> open;  // ends, innermost last
    for (const auto& [start, end] : list) {
      while (!open.empty() && open.back() <= start + 1e-9) open.pop_back();
      EXPECT_TRUE(open.empty() || end <= open.back() + 1e-9) << threads[thread] << ": [" << start << ", " << end
                                                              << "] overlaps a span without nesting in it";
      open.push_back(end);
    }
  }
  EXPECT_EQ(spans[std::make_pair(1, 1)].size(), 4u);  // backward, both matmuls, adam: the chip's own lane
  EXPECT_EQ(trace["otherData"]["in_this_file"]["spans"], 7);
  EXPECT_EQ(trace["otherData"]["in_this_file"]["first_step"], 4);
}

}  // namespace
}  // namespace tpuemu
