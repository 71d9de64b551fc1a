// A job as the job service keeps it: what was asked, where it stands and
// what it reported, in domain types. The coordinator's store and scheduler
// hold these; only its gRPC face turns them into tpuemu.v1.Job.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "core/host/job_kind.h"
#include "core/host/job_spec.h"
#include "core/pod/placement.h"

namespace tpuemu {

// kInterrupted: it was running when its coordinator stopped without
// finishing it (killed, or the machine went down); a coordinator started again
// on the same data directory says so (coordinator/job_database.h).
enum class JobState { kPending, kRunning, kSucceeded, kFailed, kCancelled, kInterrupted };

inline bool IsFinished(JobState state) { return state != JobState::kPending && state != JobState::kRunning; }

// As `tpuemu jobs` and /metrics name it: "pending", "succeeded", ...
inline const char* JobStateName(JobState state) {
  switch (state) {
    case JobState::kPending: return "pending";
    case JobState::kRunning: return "running";
    case JobState::kSucceeded: return "succeeded";
    case JobState::kFailed: return "failed";
    case JobState::kCancelled: return "cancelled";
    case JobState::kInterrupted: return "interrupted";
  }
  return "unknown";
}

// Priorities run from -kMaxPriority to kMaxPriority; 0 is the default.
inline constexpr int kMaxPriority = 1000;

struct JobRecord {
  JobRecord(std::string id, uint64_t number, JobSpec spec)
      : id(std::move(id)), number(number), spec(std::move(spec)) {}

  std::string id;       // "job-<number>"
  uint64_t number = 0;  // submit order, from 1
  JobSpec spec;
  JobState state = JobState::kPending;
  std::string error;  // why it failed or was cancelled
  double submitted_unix_s = 0;
  double finished_unix_s = 0;
  // The kind's report of the job: its preview until it succeeds, then its
  // summary (core/host/job_kind.h).
  JobReport summary;
  // Finished steps' reports, the latest ones: steps[0] is step steps_dropped.
  std::deque<JobReport> steps;
  int64_t steps_dropped = 0;
  // Each worker's memory over the job, by host, once every worker checked it.
  std::vector<HostMemoryUse> worker_memory;
  // Checkpoints and resumes (training's checkpoint_every, max_restarts): the
  // steps done at the latest checkpoint every host wrote (0: none), how many
  // times the job was resumed, and why it was the last time.
  int checkpoint_step = 0;
  // The mesh and pod it last started on, which lay its checkpoints out
  // (Scheduler: a checkpoint resumes only under the same; empty: unknown).
  std::string checkpoint_layout;
  int restarts = 0;
  int automatic_restarts = 0;  // of those, by max_restarts (what it caps); the others by `tpuemu resume`
  std::string restart_reason;
  // Where it runs, and when it last started (0: not yet).
  Placement placement;
  double started_unix_s = 0;
  // Its place in the queue: higher first, submit order among equals; a job
  // resumed because the coordinator restarted while it ran goes ahead of
  // all (and stays so through another restart while it waits).
  int priority = 0;
  bool queued_ahead = false;
  // When it last joined the queue (submitted, or resumed): its place among
  // equals, kept through a coordinator's restart. 0: its submit time.
  double queued_unix_s = 0;
  // Set only on the copies the coordinator's store hands out, never stored:
  // why the job's copy on disk misses its latest changes (empty: it does not).
  std::string unsaved;
};

}  // namespace tpuemu
