// Chrome / Perfetto trace JSON of a training job, written as its pieces
// arrive (a trace of a million spans never sits whole in the CLI's memory): a
// process for the chips and one for the links, a track (thread) each, spans
// in microseconds of emulated time. Complete events on one thread must nest;
// a span that overlaps another without nesting (a collective issued ahead
// runs beside the compute) goes to another lane of its track, a thread named
// "chip 3, lane 2".
#pragma once

#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/base/output_file.h"

#include "tpuemu/v1/coordinator.pb.h"

namespace tpuemu {

class ChromeTraceWriter {
 public:
  explicit ChromeTraceWriter(std::ostream& out);
  // Pieces in the order the coordinator sent them; the first names the job
  // and says what the coordinator kept.
  void Add(const v1::JobTrace& piece);
  // The tracks' names, in natural order (chip 2 before chip 10), and the job.
  void Finish();

  const std::string& id() const { return id_; }
  const v1::TraceExtent& extent() const { return extent_; }
  int64_t spans() const { return spans_; }

 private:
  void Write(const std::string& event_json);
  // The thread of the first lane of `track` the span nests in (spans come
  // by start within a track, enclosing ones first: BoundedTrace's order).
  int LaneTid(const std::string& track, double start_s, double end_s);

  struct Lane {
    int tid = 0;
    double last_start_s = 0;
    std::vector<double> open_ends_s;  // the spans still open at the last start, innermost last
  };
  struct Thread {
    std::string name;
    int pid = 0;
    int tid = 0;
  };
  std::ostream& out_;
  std::string id_;
  v1::TraceExtent extent_;
  std::map<std::string, std::vector<Lane>> lanes_;  // by track
  std::vector<Thread> threads_;  // by first appearance
  int64_t spans_ = 0;
  bool first_event_ = true;
};

// A trace file written whole or not at all (OutputFile: moved into place by
// Commit, so a reader never sees half a trace; dropped if not committed).
class ChromeTraceFile {
 public:
  // `flag` names the option the path came from, in errors ("-o", "--trace").
  ChromeTraceFile(std::string path, std::string flag);
  absl::Status Open();
  // An error once writing failed (a full disk).
  absl::Status Add(const v1::JobTrace& piece);
  absl::Status Commit();
  const ChromeTraceWriter& writer() const { return *writer_; }

 private:
  std::string path_, flag_;
  std::unique_ptr<OutputFile> file_;  // before the writer, which writes into it
  std::unique_ptr<ChromeTraceWriter> writer_;
};

}  // namespace tpuemu
