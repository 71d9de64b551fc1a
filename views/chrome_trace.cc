#include "views/chrome_trace.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/output_file.h"
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

void ChromeTraceWriter::Add(const v1::JobTrace& piece) {
  if (!piece.id().empty()) id_ = piece.id();
  if (piece.has_extent()) extent_ = piece.extent();
  for (const v1::TraceEvent& e : piece.events()) {
    auto [it, _] = tids_.try_emplace(e.track(), static_cast<int>(tids_.size()) + 1);
    nlohmann::json ev = {{"name", e.name()},
                         {"ph", "X"},
                         {"pid", Pid(e.track())},
                         {"tid", it->second},
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
  std::vector<std::string> tracks;
  for (const auto& [track, _] : tids_) tracks.push_back(track);
  std::sort(tracks.begin(), tracks.end(), NaturalLess);
  for (size_t i = 0; i < tracks.size(); ++i) {
    const std::string& t = tracks[i];
    const int tid = tids_.at(t);
    Write(nlohmann::json{{"name", "thread_name"}, {"ph", "M"}, {"pid", Pid(t)}, {"tid", tid}, {"args", {{"name", t}}}}
              .dump());
    Write(nlohmann::json{{"name", "thread_sort_index"},
                         {"ph", "M"},
                         {"pid", Pid(t)},
                         {"tid", tid},
                         {"args", {{"sort_index", static_cast<int>(i) + 1}}}}
              .dump());
  }
  const nlohmann::json kept = {{"steps", extent_.steps()},
                               {"first_kept_step", extent_.first_kept_step()},
                               {"last_kept_step", extent_.last_kept_step()},
                               {"spans", extent_.spans()},
                               {"spans_dropped", extent_.spans_dropped()},
                               {"dropped_why", extent_.dropped_why()}};
  out_ << "],\"displayTimeUnit\":\"ns\",\"otherData\":"
       << nlohmann::json{{"job", id_}, {"clock", "emulated, microseconds"}, {"kept", kept}}.dump() << "}\n";
}

ChromeTraceFile::ChromeTraceFile(std::string path, std::string flag)
    : path_(std::move(path)), tmp_(path_ + ".tmp"), flag_(std::move(flag)) {}

ChromeTraceFile::~ChromeTraceFile() {
  if (committed_ || !writer_) return;
  out_.close();
  std::remove(tmp_.c_str());
}

absl::Status ChromeTraceFile::Open() {
  if (auto s = CheckOutputFile(flag_, path_); !s.ok()) return s;
  out_.open(tmp_);
  if (!out_) return absl::InvalidArgumentError(absl::StrCat(flag_, ": cannot write '", path_, "'"));
  writer_ = std::make_unique<ChromeTraceWriter>(out_);
  return absl::OkStatus();
}

absl::Status ChromeTraceFile::Add(const v1::JobTrace& piece) {
  writer_->Add(piece);
  return out_ ? absl::OkStatus() : absl::InternalError(absl::StrCat("writing '", tmp_, "' failed (disk full?)"));
}

absl::Status ChromeTraceFile::Commit() {
  writer_->Finish();
  out_.close();
  if (!out_) return absl::InternalError(absl::StrCat("writing '", tmp_, "' failed (disk full?)"));
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("writing '", path_, "' failed: ", std::strerror(errno)));
  }
  committed_ = true;
  return absl::OkStatus();
}

}  // namespace tpuemu
