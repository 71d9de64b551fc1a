#include "coordinator/bounded_trace.h"

#include <algorithm>
#include <unordered_map>

#include "absl/strings/str_cat.h"

namespace tpuemu {

void BoundedTrace::AddStep(int64_t step, double start_s, const std::vector<ChipRunResult>& chips) {
  auto added = std::make_shared<StepSpans>();
  added->step = step;
  added->start_s = start_s;
  std::unordered_map<std::string, uint32_t> index;
  auto intern = [&](const std::string& s) {
    auto [it, inserted] = index.try_emplace(s, static_cast<uint32_t>(added->strings.size()));
    if (inserted) added->strings.push_back(s);
    return it->second;
  };
  uint64_t truncated = 0;
  for (const ChipRunResult& chip : chips) {
    for (const TraceEvent& e : chip.trace) {
      if (static_cast<int64_t>(added->spans.size()) == max_spans_) {
        ++truncated;
        continue;
      }
      added->spans.push_back({intern(e.track), intern(e.name), e.start_s, e.end_s, e.bytes});
    }
  }
  added->spans.shrink_to_fit();
  added->end_s = start_s;
  for (const ChipRunResult& chip : chips) added->end_s = std::max(added->end_s, start_s + chip.emulated_s);
  end_s_ = added->end_s;
  ++steps_seen_;
  spans_ += static_cast<int64_t>(added->spans.size());
  steps_.push_back(std::move(added));
  const std::string why = absl::StrCat("a job's trace keeps at most ", max_spans_, " spans, those of its latest steps");
  if (truncated > 0) Drop(truncated, why);
  while (spans_ > max_spans_) {
    const uint64_t oldest = steps_.front()->spans.size();
    steps_.pop_front();
    spans_ -= static_cast<int64_t>(oldest);
    Drop(oldest, why);
  }
}

void BoundedTrace::Clear(const std::string& why) {
  if (spans_ == 0) return;
  Drop(spans_, why);
  steps_.clear();
  spans_ = 0;
}

void BoundedTrace::DropFrom(int64_t step) {
  if (steps_.empty() ? steps_seen_ > 0 : steps_.front()->step > step) {
    // The steps before `step` are no longer kept (a cap dropped them), so
    // where `step` began is not known: the trace starts again with it, at 0.
    Drop(static_cast<uint64_t>(spans_), absl::StrCat("the job was resumed at step ", step,
                                                     ", before the steps its trace still kept"));
    steps_.clear();
    spans_ = 0;
    steps_seen_ = 0;
    end_s_ = 0;
    return;
  }
  while (!steps_.empty() && steps_.back()->step >= step) {
    spans_ -= static_cast<int64_t>(steps_.back()->spans.size());
    end_s_ = steps_.back()->start_s;
    steps_.pop_back();
    --steps_seen_;
  }
}

void BoundedTrace::Drop(uint64_t spans, const std::string& why) {
  dropped_ += spans;
  dropped_why_ = why;
}

BoundedTrace::Snapshot BoundedTrace::Read(int64_t latest_steps) const {
  Snapshot s;
  const size_t skip = latest_steps > 0 && static_cast<size_t>(latest_steps) < steps_.size()
                          ? steps_.size() - static_cast<size_t>(latest_steps)
                          : 0;
  s.steps.assign(steps_.begin() + static_cast<std::ptrdiff_t>(skip), steps_.end());
  s.extent.set_steps(steps_seen_);
  if (!steps_.empty()) {
    s.extent.set_first_kept_step(steps_.front()->step);
    s.extent.set_last_kept_step(steps_.back()->step);
  }
  if (!s.steps.empty()) {
    s.extent.set_first_step_read(s.steps.front()->step);
    s.extent.set_last_step_read(s.steps.back()->step);
  }
  s.extent.set_spans(static_cast<uint64_t>(spans_));
  s.extent.set_spans_dropped(dropped_);
  s.extent.set_dropped_why(dropped_why_);
  return s;
}

bool TracePieces::Next(size_t max_bytes, v1::JobTrace* piece) {
  piece->Clear();
  if (started_ && step_ == snapshot_.steps.size()) return false;
  if (!started_) {
    piece->set_id(id_);
    *piece->mutable_extent() = snapshot_.extent;
    started_ = true;
  }
  size_t bytes = piece->ByteSizeLong();
  for (; step_ < snapshot_.steps.size(); ++step_, span_ = 0) {
    const BoundedTrace::StepSpans& s = *snapshot_.steps[step_];
    const std::string prefix = absl::StrCat("step ", s.step, ": ");
    for (; span_ < s.spans.size(); ++span_) {
      const BoundedTrace::Span& span = s.spans[span_];
      v1::TraceEvent e;
      e.set_track(s.strings[span.track]);
      e.set_name(absl::StrCat(prefix, s.strings[span.name]));
      e.set_start_s(s.start_s + span.start_s);
      e.set_end_s(s.start_s + span.end_s);
      e.set_bytes(span.bytes);
      const size_t size = e.ByteSizeLong() + 8;  // the field's tag and length, with room to spare
      if (piece->events_size() > 0 && bytes + size > max_bytes) return true;
      bytes += size;
      *piece->add_events() = std::move(e);
    }
  }
  return true;
}

}  // namespace tpuemu
