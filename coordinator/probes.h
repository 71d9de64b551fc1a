// The coordinator's questions to workers whose heartbeats are late or whose
// connection dropped (liveness.h): a status call each, on a thread of its
// own, at most one per worker at a time, so that a stopped worker's
// unanswered call holds up nobody else.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/cluster/worker_interface.h"

namespace tpuemu {

class Probes {
 public:
  // Called with each probe's outcome, on the probe's thread.
  using Done = std::function<void(int host, uint64_t incarnation, const absl::Status& answer, absl::Duration waited)>;
  explicit Probes(Done done) : done_(std::move(done)) {}
  // Waits for the probes in flight (each ends by its deadline).
  ~Probes();

  // Asks `worker` (the holder of `host` as `incarnation`) for its status
  // within `deadline`, unless a probe of `host` is in flight already
  // (then false).
  bool Start(int host, uint64_t incarnation, std::shared_ptr<WorkerInterface> worker, absl::Duration deadline);

 private:
  struct Probe {
    std::thread thread;
    bool done = false;
  };
  void JoinFinishedLocked();

  const Done done_;
  std::mutex mu_;
  std::map<int, std::unique_ptr<Probe>> probes_;  // by host
};

}  // namespace tpuemu
