#include "views/chrome_trace.h"

#include <algorithm>
#include <cctype>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tpuemu {
namespace {

// "chip 2" before "chip 10": runs of digits compare as numbers.
bool NaturalLess(const std::string& a, const std::string& b) {
  auto key = [](const std::string& s) {
    std::vector<std::pair<std::string, long>> parts;
    std::string word;
    for (size_t i = 0; i < s.size();) {
      if (std::isdigit(static_cast<unsigned char>(s[i]))) {
        size_t j = i;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        parts.emplace_back(word, std::stol(s.substr(i, j - i)));
        word.clear();
        i = j;
      } else {
        word += s[i++];
      }
    }
    parts.emplace_back(word, -1);
    return parts;
  };
  return key(a) < key(b);
}

int Pid(const std::string& track) { return track.rfind("link", 0) == 0 ? 2 : 1; }

}  // namespace

ChromeTraceWriter::ChromeTraceWriter(std::ostream& out) : out_(out) {}

// The document starts with its first event: a trace with no spans, not
// finished, writes nothing (`trace -o -` of such a job, into a pipe).
void ChromeTraceWriter::Write(const std::string& event_json) {
  out_ << (first_event_ ? "{\"traceEvents\":[" : ",\n");
  first_event_ = false;
  out_ << event_json;
}

int ChromeTraceWriter::LaneTid(const std::string& track, double start_s, double end_s) {
  // Spans that touch (one ends where the next starts) or end together nest,
  // up to rounding of the emulated clock's sums.
  constexpr double kTouch = 1e-12;
  std::vector<Lane>& lanes = lanes_[track];
  for (Lane& lane : lanes) {
    if (start_s < lane.last_start_s) continue;  // out of order: only a later lane keeps it valid
    // The innermost open span that has not ended by `start_s`: the span
    // nests in it (or starts after every one, at the bottom of the lane).
    size_t open = lane.open_ends_s.size();
    while (open > 0 && lane.open_ends_s[open - 1] <= start_s + kTouch) --open;
    if (open == 0 || end_s <= lane.open_ends_s[open - 1] + kTouch) {
      lane.open_ends_s.resize(open);  // those ended: no later span can nest in them
      lane.last_start_s = start_s;
      lane.open_ends_s.push_back(end_s);
      return lane.tid;
    }
  }
  const int tid = static_cast<int>(threads_.size()) + 1;
  lanes.push_back({tid, start_s, {end_s}});
  threads_.push_back(
      {lanes.size() == 1 ? track : absl::StrCat(track, ", lane ", lanes.size()), Pid(track), tid});
  return tid;
}

void ChromeTraceWriter::Add(const v1::JobTrace& piece) {
  if (!piece.id().empty()) id_ = piece.id();
  if (piece.has_extent()) extent_ = piece.extent();
  for (const v1::TraceEvent& e : piece.events()) {
    nlohmann::json ev = {{"name", e.name()},
                         {"ph", "X"},
                         {"pid", Pid(e.track())},
                         {"tid", LaneTid(e.track(), e.start_s(), e.end_s())},
                         {"ts", e.start_s() * 1e6},
                         {"dur", (e.end_s() - e.start_s()) * 1e6}};
    if (e.bytes() > 0) ev["args"] = {{"bytes", e.bytes()}};
    Write(ev.dump());
    ++spans_;
  }
}

void ChromeTraceWriter::Finish() {
  Write(nlohmann::json{{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", "chips"}}}}.dump());
  Write(nlohmann::json{{"name", "process_name"}, {"ph", "M"}, {"pid", 2}, {"args", {{"name", "links"}}}}.dump());
  std::vector<Thread> threads = threads_;
  std::sort(threads.begin(), threads.end(), [](const Thread& a, const Thread& b) { return NaturalLess(a.name, b.name); });
  for (size_t i = 0; i < threads.size(); ++i) {
    const Thread& t = threads[i];
    Write(nlohmann::json{{"name", "thread_name"}, {"ph", "M"}, {"pid", t.pid}, {"tid", t.tid}, {"args", {{"name", t.name}}}}
              .dump());
    Write(nlohmann::json{{"name", "thread_sort_index"},
                         {"ph", "M"},
                         {"pid", t.pid},
                         {"tid", t.tid},
                         {"args", {{"sort_index", static_cast<int>(i) + 1}}}}
              .dump());
  }
  const nlohmann::json kept = {{"steps", extent_.steps()},
                               {"first_kept_step", extent_.first_kept_step()},
                               {"last_kept_step", extent_.last_kept_step()},
                               {"spans", extent_.spans()},
                               {"spans_dropped", extent_.spans_dropped()},
                               {"dropped_why", extent_.dropped_why()}};
  nlohmann::json other = {{"job", id_}, {"clock", "emulated, microseconds"}, {"kept", kept}};
  // What this file holds: every kept step, or the latest few a page asked for.
  other["in_this_file"] = {{"spans", spans_}};
  if (spans_ > 0) {
    other["in_this_file"]["first_step"] = extent_.first_step_read();
    other["in_this_file"]["last_step"] = extent_.last_step_read();
  }
  out_ << "],\"displayTimeUnit\":\"ns\",\"otherData\":" << other.dump() << "}\n";
}

ChromeTraceFile::ChromeTraceFile(std::string path, std::string flag) : path_(std::move(path)), flag_(std::move(flag)) {}

absl::Status ChromeTraceFile::Open() {
  auto file = OutputFile::Open(flag_, path_);
  if (!file.ok()) return file.status();
  file_ = *std::move(file);
  writer_ = std::make_unique<ChromeTraceWriter>(file_->stream());
  return absl::OkStatus();
}

absl::Status ChromeTraceFile::Add(const v1::JobTrace& piece) {
  writer_->Add(piece);
  return file_->stream() ? absl::OkStatus()
                         : absl::InternalError(absl::StrCat("writing '", path_, "' failed (disk full?)"));
}

absl::Status ChromeTraceFile::Commit() {
  writer_->Finish();
  return file_->Commit();
}

}  // namespace tpuemu
