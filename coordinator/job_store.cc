#include "coordinator/job_store.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/process_memory.h"
#include "core/job/kinds.h"
#include "spdlog/spdlog.h"

namespace tpuemu {
namespace {

double UnixSeconds() { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); }

}  // namespace

absl::StatusOr<JobStore::Restored> JobStore::Restore(const std::string& why) {
  Restored out;
  if (!db_) return out;
  auto contents = db_->Load();
  if (!contents.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot read the jobs in ", db_->path(), " (", contents.status().message(),
        "): if the file is damaged, move it aside (this coordinator then starts with no jobs) or give another "
        "--data-dir"));
  }
  for (const std::string& row : contents->unreadable) spdlog::error("{}: skipped {}", db_->path(), row);
  std::lock_guard<std::mutex> lock(mu_);
  next_number_ = contents->next_number;
  skipped_ = contents->skipped_jobs;
  finished_dropped_ = contents->finished_dropped;
  std::vector<JobRecord> finished;
  for (JobRecord& r : contents->jobs) {
    if (r.state == JobState::kRunning) {
      r.state = JobState::kInterrupted;
      r.error = why;
      r.finished_unix_s = UnixSeconds();
      Persist(r.number, db_->Put(r));
      out.interrupted.push_back(r);
      ++finished_here_[r.state];
    }
    (IsFinished(r.state) ? finished : out.pending).push_back(r);
    std::string id = r.id;  // not r.id itself: moving r empties it before emplace reads it
    jobs_.emplace(std::move(id), Entry(std::move(r), retention_.trace_spans_per_job));
  }
  // Retired in the order they finished, so that the cap drops the oldest.
  std::stable_sort(finished.begin(), finished.end(),
                   [](const JobRecord& a, const JobRecord& b) { return a.finished_unix_s < b.finished_unix_s; });
  for (const JobRecord& r : finished) RetireLocked(r.id);
  // Queued again in the order they joined the queue (a resumed job joined
  // it when resumed, not when submitted).
  const auto joined = [](const JobRecord& r) { return r.queued_unix_s > 0 ? r.queued_unix_s : r.submitted_unix_s; };
  std::stable_sort(out.pending.begin(), out.pending.end(),
                   [&](const JobRecord& a, const JobRecord& b) { return joined(a) < joined(b); });
  return out;
}

absl::StatusOr<JobRecord> JobStore::Add(JobSpec spec, int priority) {
  std::lock_guard<std::mutex> lock(mu_);
  CatchUpLocked();
  const uint64_t number = next_number_;
  JobRecord record(absl::StrCat("job-", number), number, std::move(spec));
  record.submitted_unix_s = UnixSeconds();
  record.priority = priority;
  if (db_) {
    if (auto s = db_->Add(record, number + 1); !s.ok()) {
      // Not Unavailable: the coordinator answered, and the client must not
      // read it as a pod that is not running.
      return absl::FailedPreconditionError(absl::StrCat("the job was not accepted: the coordinator could not "
                                                        "record it in ", db_->path(), " (", s.message(),
                                                        "); see its log"));
    }
  }
  ++next_number_;
  jobs_.emplace(record.id, Entry(record, retention_.trace_spans_per_job));
  return record;
}

void JobStore::Persist(uint64_t number, const absl::Status& written) {
  if (written.ok()) return;
  if (unsaved_.empty()) {  // said once, not on every step while the disk is full
    spdlog::error("{}: {}; the coordinator keeps the changes in memory and writes them again once the file takes "
                  "them (stopped before then, it would come back with the older records)",
                  db_->path(), std::string(written.message()));
    next_catch_up_ = absl::Now() + kCatchUpPause;
  }
  unsaved_.insert(number);
  unsaved_why_ = std::string(written.message());
}

void JobStore::CatchUp() {
  std::lock_guard<std::mutex> lock(mu_);
  CatchUpLocked();
}

void JobStore::CatchUpLocked() {
  if (unsaved_.empty() || absl::Now() < next_catch_up_) return;
  for (auto number = unsaved_.begin(); number != unsaved_.end();) {
    // A job dropped by retention meanwhile is dropped from the file too.
    auto it = jobs_.find(absl::StrCat("job-", *number));
    const absl::Status s = it != jobs_.end() ? db_->Rewrite(it->second.record) : db_->Drop(*number, finished_dropped_);
    if (!s.ok()) {
      unsaved_why_ = std::string(s.message());
      next_catch_up_ = absl::Now() + kCatchUpPause;
      return;
    }
    number = unsaved_.erase(number);
    if (it != jobs_.end()) {  // its copies handed out from now on say nothing of it: news to waiters
      ++it->second.version;
      changed_.notify_all();
    }
  }
  spdlog::info("{}: the changes it had refused are written: every job's record is on disk again", db_->path());
}

JobRecord JobStore::ShownLocked(const JobRecord& record) const {
  JobRecord shown = record;
  if (unsaved_.count(record.number)) {
    shown.unsaved = absl::StrCat("its latest changes are not on disk: ", db_->path(), " refused them (", unsaved_why_,
                                 "); the coordinator writes them once it can, and would come back without them "
                                 "if stopped before");
  }
  return shown;
}

absl::StatusOr<JobRecord> JobStore::Get(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return MissingLocked(id);
  return ShownLocked(it->second.record);
}

bool JobStore::Forgotten(uint64_t number) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (number == 0 || number >= next_number_ || skipped_.count(number)) return false;
  auto it = jobs_.find(absl::StrCat("job-", number));
  return it == jobs_.end() || it->second.record.state == JobState::kSucceeded;
}

JobStore::Listing JobStore::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  Listing out;
  for (const auto& [_, e] : jobs_) out.jobs.push_back(ShownLocked(e.record));
  std::sort(out.jobs.begin(), out.jobs.end(),
            [](const JobRecord& a, const JobRecord& b) { return a.number < b.number; });
  out.finished_dropped = finished_dropped_;
  out.finished_kept = retention_.finished_jobs;
  out.finished_here = finished_here_;
  return out;
}

absl::Status JobStore::MissingLocked(const std::string& id) const {
  uint64_t number = 0;
  const bool numbered = absl::StartsWith(id, "job-") && absl::SimpleAtoi(id.substr(4), &number) && number > 0;
  if (auto skipped = skipped_.find(number); numbered && skipped != skipped_.end()) {
    return absl::DataLossError(absl::StrCat("job '", id, "': its record in the job store could not be read when the "
                                            "coordinator started (", skipped->second,
                                            "), so it was left out; the row stays in the file"));
  }
  if (numbered && number < next_number_) {
    return absl::NotFoundError(absl::StrCat("job '", id, "' finished and its record was dropped: the coordinator keeps ",
                                            "the last ", retention_.finished_jobs, " finished jobs"));
  }
  return absl::NotFoundError(absl::StrCat("job '", id, "' does not exist; see `tpuemu jobs`"));
}

absl::StatusOr<std::pair<JobRecord, int64_t>> JobStore::Wait(const std::string& id, int64_t after_version,
                                                            absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  // Looked up again on every wake: a finished job's record may be dropped
  // meanwhile (RetireLocked).
  auto it = jobs_.find(id);
  changed_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] {
    it = jobs_.find(id);
    return it == jobs_.end() || it->second.version != after_version || closed_;
  });
  if (it == jobs_.end()) return MissingLocked(id);
  return std::make_pair(ShownLocked(it->second.record), it->second.version);
}

void JobStore::Update(const std::string& id, const std::function<void(JobRecord&)>& change) {
  std::lock_guard<std::mutex> lock(mu_);
  CatchUpLocked();
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  const bool was_finished = IsFinished(it->second.record.state);
  change(it->second.record);
  if (!was_finished && IsFinished(it->second.record.state)) it->second.record.finished_unix_s = UnixSeconds();
  if (db_) Persist(it->second.record.number, db_->Put(it->second.record));
  ChangedLocked(it->second, was_finished);
}

void JobStore::Rewind(const std::string& id, int done, const std::function<void(JobRecord&)>& change) {
  std::lock_guard<std::mutex> lock(mu_);
  CatchUpLocked();
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  JobRecord& r = it->second.record;
  while (!r.steps.empty() && r.steps_dropped + static_cast<int64_t>(r.steps.size()) > done) r.steps.pop_back();
  BoundedTrace& trace = it->second.trace;
  trace_spans_ -= trace.spans();
  trace.DropFrom(done);
  trace_spans_ += trace.spans();
  if (r.steps.empty()) r.steps_dropped = std::min<int64_t>(r.steps_dropped, done);
  const bool was_finished = IsFinished(r.state);
  change(r);
  if (was_finished && !IsFinished(r.state)) {
    // Running again: no longer one of the finished records retention may drop.
    finished_.erase(std::remove(finished_.begin(), finished_.end(), id), finished_.end());
    r.finished_unix_s = 0;
  }
  if (db_) {
    Persist(r.number, db_->DropStepsFrom(r.number, done));
    Persist(r.number, db_->Put(r));
  }
  ChangedLocked(it->second, was_finished);
}

void JobStore::AddStep(const std::string& id, JobReport report) {
  std::lock_guard<std::mutex> lock(mu_);
  CatchUpLocked();
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  JobRecord& r = it->second.record;
  r.steps.push_back(std::move(report));
  for (; static_cast<int64_t>(r.steps.size()) > retention_.step_records_per_job; ++r.steps_dropped) {
    r.steps.pop_front();
  }
  if (db_) {
    const int64_t index = r.steps_dropped + static_cast<int64_t>(r.steps.size()) - 1;
    Persist(r.number, db_->PutStep(r.number, index, r.steps.back(), r.steps_dropped));
  }
  ChangedLocked(it->second, IsFinished(r.state));
}

void JobStore::ChangedLocked(Entry& entry, bool was_finished) {
  ++entry.version;
  changed_.notify_all();
  if (!was_finished && IsFinished(entry.record.state)) {
    ++finished_here_[entry.record.state];
    RetireLocked(entry.record.id);
  }
}

void JobStore::RetireLocked(const std::string& id) {
  finished_.push_back(id);
  bool dropped = false;
  while (static_cast<int>(finished_.size()) > retention_.finished_jobs) {
    auto oldest = jobs_.find(finished_.front());
    trace_spans_ -= oldest->second.trace.spans();
    ++finished_dropped_;
    if (db_) Persist(oldest->second.record.number, db_->Drop(oldest->second.record.number, finished_dropped_));
    jobs_.erase(oldest);
    finished_.pop_front();
    dropped = true;
  }
  // A dropped record may have held a trace of tens of MB in many small
  // blocks; glibc keeps freed blocks for reuse, so the process would stay at
  // its high-water mark. Give them back (a few ms, once per finished job).
  if (dropped) ReleaseFreedMemory();
}

void JobStore::AddTraceStep(const std::string& id, int64_t step, const std::vector<ChipRunResult>& chips) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  BoundedTrace& trace = it->second.trace;
  const int64_t before = trace.spans();
  trace.AddStep(step, trace.end_s(), chips);
  trace_spans_ += trace.spans() - before;
  const std::string why = absl::StrCat("the coordinator keeps at most ", retention_.trace_spans_total,
                                       " spans of traces; newer jobs' took the room");
  for (auto f = finished_.begin(); trace_spans_ > retention_.trace_spans_total && f != finished_.end(); ++f) {
    BoundedTrace& old = jobs_.at(*f).trace;
    trace_spans_ -= old.spans();
    old.Clear(why);
  }
}

absl::StatusOr<BoundedTrace::Snapshot> JobStore::ReadTrace(const std::string& id, int64_t latest_steps) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return MissingLocked(id);
  const std::string& kind = it->second.record.spec.kind();
  if (auto k = FindJobKind(kind); !k.ok() || !(*k)->traced()) {
    return absl::InvalidArgumentError(absl::StrCat(id, " is a ", kind, " job; traces are recorded for training jobs "
                                                   "(a ", kind, " job's times and link bytes: `tpuemu status ", id,
                                                   " --json`)"));
  }
  return it->second.trace.Read(latest_steps);
}

void JobStore::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  // A last try, whenever the one before was: the next coordinator reads the file.
  next_catch_up_ = absl::InfinitePast();
  CatchUpLocked();
  if (!unsaved_.empty()) {
    std::vector<std::string> ids;
    for (uint64_t number : unsaved_) ids.push_back(absl::StrCat("job-", number));
    spdlog::error("{}: stopping with the latest changes of {} not on disk ({}): the next coordinator reads their "
                  "older records", db_->path(), absl::StrJoin(ids, ", "), unsaved_why_);
  }
  closed_ = true;
  changed_.notify_all();
}

}  // namespace tpuemu
