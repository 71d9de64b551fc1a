// One host's share of a job (a collective, a matmul or training), run on a thread per
// local chip in three steps that a pod runs on every host at once, so that no
// chip's set-up or checking steals the cores another chip is moving data
// with: Prepare (buffers allocated and filled), Run (timed), Check (results
// verified).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/host/chip_result.h"
#include "core/host/run_options.h"
#include "core/wire/host_network.h"
#include "core/pod/faults.h"

namespace tpuemu {

struct ChipCheck {
  int chip = 0;
  uint64_t mismatches = 0;  // collectives: elements that differ from the reference
  double max_abs_err = 0;   // matmuls: max |C - one-device product| over the chip's block
  double max_abs_ref = 0;   // matmuls: max |one-device product| over the block
  double param_squares = 0; // training: sum of squares of the chip's weight shards
};

// A worker process's resident memory over one job: before it was prepared
// and its peak. (The process's figures: in a test that runs every worker in
// one process, the whole process's.)
struct HostMemoryUse {
  int host = -1;
  uint64_t before_bytes = 0;
  uint64_t peak_bytes = 0;
};

// A HostJob is the job's existence on its host: from construction to
// destruction the host's mailbox takes the job's frames (up to what the job
// may hold there) and its aborts.
class HostJob {
 public:
  virtual ~HostJob();
  HostJob(const HostJob&) = delete;
  HostJob& operator=(const HostJob&) = delete;
  // Fails when the share cannot start (training: a checkpoint to resume from is missing).
  virtual absl::Status Prepare() = 0;
  // Collectives and matmuls run once (step 0); training jobs a step per call.
  virtual absl::StatusOr<std::vector<ChipRunResult>> Run(int step) = 0;
  // Called before each Run, while none of the job's chips runs: the faults
  // added to the job since it started (all of them). Only training takes any.
  virtual absl::Status AddFaults(const Faults& added);
  virtual std::vector<ChipCheck> Check() = 0;

 protected:
  // `max_buffered_bytes`: the most of the job's received data the host may
  // hold at once (frames not yet taken by their chips).
  HostJob(HostNetwork& net, uint64_t job, uint64_t max_buffered_bytes);

 private:
  HostNetwork& net_;
  const uint64_t job_;
};

// HostJobs alive in this process now (a worker has at most one; a test
// that runs every worker in one process, one per worker): what may still be
// computing or moving data.
int LiveHostJobs();

// Runs fn(0..n-1) on n threads and joins them. An exception one of them
// throws (std::bad_alloc) is rethrown here once all have ended, so that it
// reaches the caller's boundary instead of terminating the process.
void OnThreads(size_t n, const std::function<void(size_t)>& fn);

// Runs every chip's `move` at once (the first failure aborts the job, so that
// the other chips stop computing and waiting for data that will never come),
// then, once all have stopped, collects every chip's `report`.
absl::StatusOr<std::vector<ChipRunResult>> RunChips(HostNetwork& net, const RunOptions& options, size_t n,
                                                    const std::function<absl::Status(size_t)>& move,
                                                    const std::function<absl::StatusOr<ChipRunResult>(size_t)>& report);

}  // namespace tpuemu
