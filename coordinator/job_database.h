// The job store's copy on disk (--data-dir): every job's record and step
// reports in SQLite, so that a coordinator started again on the same
// directory, even after SIGKILL, lists what the last one had. WAL journal,
// each write synced before the call returns (synchronous=FULL): what a client
// was told was recorded survives a crash. One coordinator per directory, held
// by a lock file for the process's life.
#pragma once

#include <cstdint>
#include <memory>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/job/record.h"

struct sqlite3;

namespace tpuemu {

class JobDatabase {
 public:
  // Opens (creating it if need be) `dir`/jobs.db and locks the directory.
  static absl::StatusOr<std::unique_ptr<JobDatabase>> Open(const std::string& dir);
  ~JobDatabase();
  JobDatabase(const JobDatabase&) = delete;
  JobDatabase& operator=(const JobDatabase&) = delete;

  struct Contents {
    std::vector<JobRecord> jobs;  // oldest first, with their kept steps
    uint64_t next_number = 1;     // numbers already given stay given
    uint64_t finished_dropped = 0;
    std::vector<std::string> unreadable;  // rows skipped, and why (left in the file)
    std::map<uint64_t, std::string> skipped_jobs;  // of those, the jobs' records, by number: why
  };
  absl::StatusOr<Contents> Load();

  // A new job, with the number the next one will get.
  absl::Status Add(const JobRecord& record, uint64_t next_number);
  // The record as it is now, without its steps (PutStep keeps those).
  absl::Status Put(const JobRecord& record);
  // Step `index` of job `number` (counted from its first step), and the
  // ones before `keep_from` dropped.
  absl::Status PutStep(uint64_t number, int64_t index, const JobReport& step, int64_t keep_from);
  // Job `number`'s step reports from step `from` on (it resumes there).
  absl::Status DropStepsFrom(uint64_t number, int64_t from);
  // A finished job's record dropped by retention.
  absl::Status Drop(uint64_t number, uint64_t finished_dropped);
  // The record and its kept steps written whole, replacing what the file
  // has of the job: its copy after writes that failed (JobStore).
  absl::Status Rewrite(const JobRecord& record);

  const std::string& path() const { return path_; }

 private:
  absl::Status InsertStep(uint64_t number, int64_t index, const JobReport& step);
  JobDatabase(sqlite3* db, int lock_fd, std::string path) : db_(db), lock_fd_(lock_fd), path_(std::move(path)) {}

  sqlite3* db_;
  int lock_fd_;
  std::string path_;
};

}  // namespace tpuemu
