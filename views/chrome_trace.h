// Chrome / Perfetto trace JSON of a training job, written as its pieces
// arrive (a trace of a million spans never sits whole in the CLI's memory): a
// process for the chips and one for the links, a track (thread) each, spans
// in microseconds of emulated time.
#pragma once

#include <map>
#include <ostream>
#include <string>

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

}  // namespace tpuemu
