// Chrome / Perfetto trace JSON of a training job, written as its pieces
// arrive (a trace of a million spans never sits whole in the CLI's memory): a
// process for the chips and one for the links, a track (thread) each, spans
// in microseconds of emulated time.
#pragma once

#include <fstream>
#include <map>
#include <memory>
#include <ostream>
#include <string>

#include "absl/status/status.h"

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

  std::ostream& out_;
  std::string id_;
  v1::TraceExtent extent_;
  std::map<std::string, int> tids_;  // by first appearance
  int64_t spans_ = 0;
  bool first_event_ = true;
};

// A trace file written whole or not at all: into PATH.tmp, renamed to PATH
// by Commit (a reader never sees half a trace); dropped if not committed.
class ChromeTraceFile {
 public:
  // `flag` names the option the path came from, in errors ("-o", "--trace").
  ChromeTraceFile(std::string path, std::string flag);
  ~ChromeTraceFile();
  absl::Status Open();
  // An error once writing failed (a full disk).
  absl::Status Add(const v1::JobTrace& piece);
  absl::Status Commit();
  const ChromeTraceWriter& writer() const { return *writer_; }

 private:
  std::string path_, tmp_, flag_;
  std::ofstream out_;
  std::unique_ptr<ChromeTraceWriter> writer_;
  bool committed_ = false;
};

}  // namespace tpuemu
