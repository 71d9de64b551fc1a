// The number a job's run travels under between the coordinator and its
// workers: the job's number and which attempt this is (a resumed job runs
// again). Each attempt is a job of its own to the workers' mailboxes, so that
// nothing of an aborted attempt (a late frame, a remembered abort) reaches the
// next; checkpoints belong to the job, whichever attempt wrote them. Runs are
// ordered as jobs are within one coordinator's epoch: a later job's first run
// comes after every run of an earlier one.
//
// Bits 0-7 hold the attempt, 8-39 the job's number and 40-63 the epoch of the
// coordinator that runs it, drawn when it starts: one restarted without its
// job store numbers jobs from 1 again, and a frame of the last one's job-1
// still in flight must not count for the new job-1.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace tpuemu {

inline constexpr int kMaxAttempts = 256;

inline constexpr int kRunEpochShift = 40;
inline constexpr uint32_t kRunEpochMask = (1u << (64 - kRunEpochShift)) - 1;

inline uint64_t RunNumber(uint64_t job, int attempt, uint32_t epoch = 0) {
  return (uint64_t{epoch & kRunEpochMask} << kRunEpochShift) | (job * kMaxAttempts + attempt);
}
inline uint64_t JobOfRun(uint64_t run) { return (run & ((uint64_t{1} << kRunEpochShift) - 1)) / kMaxAttempts; }
inline bool FirstAttempt(uint64_t run) { return run % kMaxAttempts == 0; }
// A run as users know its job, in logs: "job-2", "job-2 (attempt 3)".
inline std::string RunName(uint64_t run) {
  const uint64_t attempt = run % kMaxAttempts;
  return absl::StrCat("job-", JobOfRun(run), attempt > 0 ? absl::StrCat(" (attempt ", attempt + 1, ")") : "");
}

}  // namespace tpuemu
