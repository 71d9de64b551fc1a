// The coordinator's jobs: every record it keeps (core/job/record.h), each
// with a version that changes with it so that callers can wait for news, and
// training jobs' traces. Bounded by JobRetention: finished jobs' records,
// step records and trace spans beyond the caps go, the oldest first. With a
// JobDatabase every record and step is also on disk, written before the
// change is visible, and read back by Restore (traces stay in memory only).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/bounded_trace.h"
#include "coordinator/job_database.h"
#include "core/job/record.h"

namespace tpuemu {

// What the coordinator keeps of jobs, so that its memory stays bounded
// however many jobs run and however long (docs/jobs.md, "What the
// coordinator keeps"). A kept span costs about 40 bytes.
struct JobRetention {
  int64_t trace_spans_per_job = 1'000'000;  // a job's trace: its latest steps' spans, at most this many
  int64_t trace_spans_total = 2'000'000;    // all traces: the oldest finished jobs' go first
  int step_records_per_job = 1'000;         // a job's step records: its latest steps'
  int finished_jobs = 100;                  // finished jobs' records: the oldest go first
};

class JobStore {
 public:
  // Without a database the records live as long as the process.
  explicit JobStore(const JobRetention& retention, std::unique_ptr<JobDatabase> db = nullptr)
      : retention_(retention), db_(std::move(db)) {}

  // Reads the database's records back: jobs that were running become
  // kInterrupted with `why` as their error. Returns the pending ones, in the
  // order they joined the queue, for the scheduler to queue again, and the
  // ones just interrupted.
  struct Restored {
    std::vector<JobRecord> pending, interrupted;
  };
  absl::StatusOr<Restored> Restore(const std::string& why);
  // A new pending job's record, numbered in submit order; an error if the
  // database could not record it (then there is no such job).
  absl::StatusOr<JobRecord> Add(JobSpec spec, int priority = 0);
  absl::StatusOr<JobRecord> Get(const std::string& id) const;
  // Whether nothing will resume job `number` any more: a number this store
  // gave whose record went (or succeeded). Not a record it could not read,
  // nor a number it never gave (another pod's, another store's).
  bool Forgotten(uint64_t number) const;

  struct Listing {
    std::vector<JobRecord> jobs;  // oldest first
    uint64_t finished_dropped = 0;
    int finished_kept = 0;  // the cap on finished jobs' records
    // Jobs' endings in this process, by the state they ended in: a count
    // that retention never lowers. A job run again (Rewind) that ends again
    // counts again; Restore's interrupted jobs count as they are found.
    std::map<JobState, uint64_t> finished_here;
  };
  Listing List() const;

  // Waits until the job's version passes `after_version`, `timeout` passes
  // or the store closes; returns the job and its version.
  absl::StatusOr<std::pair<JobRecord, int64_t>> Wait(const std::string& id, int64_t after_version,
                                                     absl::Duration timeout);
  // Changes a job's record and wakes its waiters; a job that finishes with
  // the change joins the finished ones. A job whose record went is skipped.
  void Update(const std::string& id, const std::function<void(JobRecord&)>& change);
  // A job resumed after `done` steps: its step reports from there on go (its
  // next run makes them again), then `change` applies as Update's.
  void Rewind(const std::string& id, int done, const std::function<void(JobRecord&)>& change);
  // Appends a finished step's report, keeping the latest step_records_per_job.
  void AddStep(const std::string& id, JobReport report);
  // Adds a traced step's spans, the step starting on the job's clock where
  // the last one kept ended (a resumed job's: Rewind dropped those it runs again).
  void AddTraceStep(const std::string& id, int64_t step, const std::vector<ChipRunResult>& chips);
  absl::StatusOr<BoundedTrace::Snapshot> ReadTrace(const std::string& id, int64_t latest_steps = 0) const;
  // Wakes every waiter for good (shutting down).
  void Close();
  // Whether the records outlive the process (a JobDatabase).
  bool durable() const { return db_ != nullptr; }
  // Writes again what the database refused (a full disk, say), once a
  // second at most; every write calls it too. A record handed out while its
  // copy on disk is behind says so in `unsaved`.
  void CatchUp();

 private:
  struct Entry {
    explicit Entry(JobRecord record, int64_t trace_spans) : record(std::move(record)), trace(trace_spans) {}
    JobRecord record;
    int64_t version = 0;
    BoundedTrace trace;
  };
  // A job that is not here: never submitted, or its record dropped.
  absl::Status MissingLocked(const std::string& id) const;
  void ChangedLocked(Entry& entry, bool was_finished);
  // A job that just finished joins finished_, whose oldest records go past the cap.
  void RetireLocked(const std::string& id);
  // A write to the database for job `number`, made after the change: if it
  // failed, the record in memory stays right and the job joins unsaved_,
  // for CatchUpLocked to write whole later.
  void Persist(uint64_t number, const absl::Status& written);
  void CatchUpLocked();
  // `record` as handed out: with `unsaved` set while its copy on disk is behind.
  JobRecord ShownLocked(const JobRecord& record) const;
  static constexpr absl::Duration kCatchUpPause = absl::Seconds(1);

  const JobRetention retention_;
  const std::unique_ptr<JobDatabase> db_;  // null: in memory only
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, Entry> jobs_;
  std::deque<std::string> finished_;  // finished jobs kept, oldest first
  uint64_t finished_dropped_ = 0;
  std::map<JobState, uint64_t> finished_here_;
  int64_t trace_spans_ = 0;  // kept in all jobs' traces
  uint64_t next_number_ = 1;
  std::map<uint64_t, std::string> skipped_;  // records the database held but could not read: why
  bool closed_ = false;
  std::set<uint64_t> unsaved_;  // jobs whose copy on disk misses changes the database refused
  std::string unsaved_why_;     // its latest refusal
  absl::Time next_catch_up_;
};

}  // namespace tpuemu
