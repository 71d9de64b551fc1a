// A training job's trace as the coordinator keeps it: the spans of its latest
// steps, at most a capped number, each step stored compactly (its track and
// span names once, a span in 32 bytes) and never changed once added, so that
// a reader can take a snapshot under the coordinator's lock and serialize it
// outside it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/collective/executor.h"
#include "services/coordinator_service.h"
#include "tpuemu/v1/coordinator.pb.h"

namespace tpuemu {

class BoundedTrace {
 public:
  struct Span {
    uint32_t track = 0;  // index into StepSpans::strings
    uint32_t name = 0;
    double start_s = 0;  // from the step's start
    double end_s = 0;
    uint64_t bytes = 0;
  };
  struct StepSpans {
    int64_t step = 0;
    double start_s = 0;  // on the job's clock
    double end_s = 0;    // its slowest chip's end, where the next step starts
    std::vector<std::string> strings;
    std::vector<Span> spans;
  };
  // What a reader gets: the kept steps and the extent at the time it asked.
  struct Snapshot {
    std::vector<std::shared_ptr<const StepSpans>> steps;
    v1::TraceExtent extent;
  };

  explicit BoundedTrace(int64_t max_spans) : max_spans_(max_spans) {}

  // Adds one step's spans (times from the step's start), the step starting at
  // `start_s` on the job's clock; then drops the oldest steps until at most
  // max_spans are kept. A step bigger than the cap alone keeps its first
  // max_spans spans.
  void AddStep(int64_t step, double start_s, const std::vector<ChipRunResult>& chips);
  // Drops every span, saying why (the pod-wide budget needed the room).
  void Clear(const std::string& why);
  // Forgets steps `step` on: a job resumed from its checkpoint runs them
  // again, and its trace shows each step once, on one clock. When the steps
  // before `step` were dropped already, it forgets them all and starts again
  // at 0 (where `step` began is not kept).
  void DropFrom(int64_t step);
  // Where the step after the last one added (or after DropFrom, step `step`)
  // starts on the job's clock.
  double end_s() const { return end_s_; }
  int64_t spans() const { return spans_; }
  // The kept steps, or only the latest `latest_steps` of them when that is
  // above 0 (what a page showing a running job needs, every poll). The extent
  // describes what is kept either way.
  Snapshot Read(int64_t latest_steps = 0) const;

 private:
  void Drop(uint64_t spans, const std::string& why);

  int64_t max_spans_;
  std::deque<std::shared_ptr<const StepSpans>> steps_;
  int64_t spans_ = 0;
  int64_t steps_seen_ = 0;
  double end_s_ = 0;
  uint64_t dropped_ = 0;
  std::string dropped_why_;
};

// Serializes a snapshot piece by piece (JobTraceReader), outside the
// coordinator's lock.
class TracePieces : public JobTraceReader {
 public:
  TracePieces(std::string id, BoundedTrace::Snapshot snapshot)
      : id_(std::move(id)), snapshot_(std::move(snapshot)) {}
  bool Next(size_t max_bytes, v1::JobTrace* piece) override;

 private:
  const std::string id_;
  const BoundedTrace::Snapshot snapshot_;
  bool started_ = false;
  size_t step_ = 0;  // the next span to give: snapshot_.steps[step_]->spans[span_]
  size_t span_ = 0;
};

}  // namespace tpuemu
