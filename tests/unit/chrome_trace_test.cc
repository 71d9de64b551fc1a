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

// Each thread's name, and its complete events as [start, end] in file order.
struct Threads {
  std::map<std::pair<int, int>, std::string> names;
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> spans;
};

Threads Read(const nlohmann::json& trace) {
  Threads t;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (!e.contains("tid")) continue;  // a process's name
    const std::pair<int, int> thread{e["pid"].get<int>(), e["tid"].get<int>()};
    if (e["ph"] == "M" && e["name"] == "thread_name") t.names[thread] = e["args"]["name"].get<std::string>();
    const double ts = e.value("ts", 0.0);
    if (e["ph"] == "X") t.spans[thread].emplace_back(ts, ts + e["dur"].get<double>());
  }
  return t;
}

// Every thread's spans nest, in whatever order the file has them.
void ExpectEveryThreadNests(const Threads& t) {
  for (const auto& [thread, list] : t.spans) {
    for (const auto& a : list) {
      for (const auto& b : list) {
        const bool apart = a.second <= b.first + 1e-9 || b.second <= a.first + 1e-9;
        const bool nested = (a.first >= b.first - 1e-9 && a.second <= b.second + 1e-9) ||
                            (b.first >= a.first - 1e-9 && b.second <= a.second + 1e-9);
        EXPECT_TRUE(apart || nested) << t.names.at(thread) << ": [" << a.first << ", " << a.second << "] and ["
                                     << b.first << ", " << b.second << "] overlap without nesting";
      }
    }
  }
}

nlohmann::json Written(const v1::JobTrace& piece) {
  std::ostringstream out;
  ChromeTraceWriter writer(out);
  writer.Add(piece);
  writer.Finish();
  return nlohmann::json::parse(out.str());
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
  AddSpan(piece, "chip 0", "matmul", 4, 10);
  AddSpan(piece, "chip 0", "all-reduce data (ahead)", 5, 14);  // and the first ahead
  AddSpan(piece, "chip 0", "adam", 14, 15);
  AddSpan(piece, "link 0->1 x+", "chunk", 3, 6);
  const nlohmann::json trace = Written(piece);

  const Threads t = Read(trace);
  std::vector<std::string> names;
  for (const auto& [_, name] : t.names) names.push_back(name);
  EXPECT_THAT(names, testing::UnorderedElementsAre("chip 0", "chip 0, lane 2", "chip 0, lane 3", "link 0->1 x+"));
  ExpectEveryThreadNests(t);
  const auto& spans = t.spans;
  EXPECT_EQ(spans.at(std::make_pair(1, 1)).size(), 4u);  // backward, both matmuls, adam: the chip's own lane
  EXPECT_EQ(trace["otherData"]["in_this_file"]["spans"], 7);
  EXPECT_EQ(trace["otherData"]["in_this_file"]["first_step"], 4);
}

// Out of order (not what a step clock gives): still valid, if in more lanes.
TEST(ChromeTraceTest, SpansOutOfOrderStillNestOnEveryThread) {
  v1::JobTrace piece;
  for (const auto& [start, end] : std::vector<std::pair<double, double>>{{0, 10}, {2, 3}, {5, 12}, {2.5, 4}, {1, 2}}) {
    AddSpan(piece, "chip 0", "op", start, end);
  }
  ExpectEveryThreadNests(Read(Written(piece)));
}

}  // namespace
}  // namespace tpuemu
