// Deletes the checkpoints of jobs nothing will resume. A worker keeps a
// failed, cancelled or interrupted job's checkpoints for `tpuemu resume`; once
// the coordinator holds no record that could resume the job (retention dropped
// it) they would stay on disk for good. Every so often the janitor lists the
// job directories under the worker's checkpoint directory, asks the
// coordinator which of those jobs it has forgotten (numbers it gave whose
// record went or succeeded: JobStore::Forgotten), and deletes theirs once the
// coordinator has said so for a grace period without a break (a coordinator
// started by mistake without its job store, then again with it, costs
// nothing): on a thread and a connection of its own, so that neither the
// disk nor the question ever delays a heartbeat.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/cluster/registrar.h"

namespace tpuemu {

class CheckpointJanitor {
 public:
  CheckpointJanitor(std::unique_ptr<Registrar> coordinator, std::string dir, absl::Duration grace);
  ~CheckpointJanitor();  // stops, and waits for a sweep under way

  // Sweeps every `every`, from `every` after now, until destroyed.
  void Start(absl::Duration every);
  // One sweep at `now`: the jobs whose checkpoints it deleted; an error when
  // the coordinator did not answer (nothing is deleted then).
  absl::StatusOr<std::vector<uint64_t>> SweepOnce(absl::Time now);

 private:
  const std::unique_ptr<Registrar> coordinator_;
  const std::string dir_;
  const absl::Duration grace_;
  std::map<uint64_t, absl::Time> forgotten_since_;  // by the sweeps' thread only
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tpuemu
