#include "coordinator/job_database.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>

#include "absl/strings/str_cat.h"
#include "services/job_proto.h"

namespace tpuemu {
namespace {

// PRAGMA user_version of the files this build writes; a newer file is refused.
constexpr int kSchemaVersion = 1;

constexpr char kSchema[] = R"(
CREATE TABLE IF NOT EXISTS jobs (
  number INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  record BLOB NOT NULL          -- tpuemu.v1.Job without its steps
);
CREATE TABLE IF NOT EXISTS steps (
  number INTEGER NOT NULL,
  step INTEGER NOT NULL,        -- counted from the job's first step
  report BLOB NOT NULL,         -- tpuemu.v1.TrainStep
  PRIMARY KEY (number, step)
);
CREATE TABLE IF NOT EXISTS counters (
  name TEXT PRIMARY KEY,
  value INTEGER NOT NULL
);
)";

// One prepared statement, finalized on every path.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  }
  ~Statement() { sqlite3_finalize(stmt_); }

  Statement& Bind(int i, int64_t v) {
    if (rc_ == SQLITE_OK) rc_ = sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Statement& Bind(int i, const std::string& text) {
    if (rc_ == SQLITE_OK) rc_ = sqlite3_bind_text(stmt_, i, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& BindBlob(int i, const std::string& bytes) {
    if (rc_ == SQLITE_OK) {
      rc_ = sqlite3_bind_blob(stmt_, i, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
    }
    return *this;
  }
  // Runs a statement that returns no rows.
  absl::Status Run(const std::string& what) {
    if (rc_ == SQLITE_OK) rc_ = sqlite3_step(stmt_) == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db_);
    return Check(what);
  }
  // The next row, false after the last (or on an error: see Check).
  bool Next() {
    if (rc_ != SQLITE_OK) return false;
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) rc_ = rc;
    return false;
  }
  int64_t Int(int col) { return sqlite3_column_int64(stmt_, col); }
  std::string Blob(int col) {
    const void* p = sqlite3_column_blob(stmt_, col);
    return std::string(static_cast<const char*>(p), sqlite3_column_bytes(stmt_, col));
  }
  absl::Status Check(const std::string& what) const {
    if (rc_ == SQLITE_OK) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat(what, ": ", sqlite3_errmsg(db_)));
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

absl::Status Exec(sqlite3* db, const char* sql, const std::string& what) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &message) == SQLITE_OK) return absl::OkStatus();
  const std::string text = message ? message : sqlite3_errmsg(db);
  sqlite3_free(message);
  return absl::UnavailableError(absl::StrCat(what, ": ", text));
}

absl::Status SetCounter(sqlite3* db, const char* name, int64_t value) {
  return Statement(db, "INSERT INTO counters (name, value) VALUES (?, ?) "
                       "ON CONFLICT (name) DO UPDATE SET value = excluded.value")
      .Bind(1, std::string(name))
      .Bind(2, value)
      .Run(absl::StrCat("recording ", name));
}

int64_t Counter(sqlite3* db, const char* name, int64_t otherwise) {
  Statement s(db, "SELECT value FROM counters WHERE name = ?");
  s.Bind(1, std::string(name));
  return s.Next() ? s.Int(0) : otherwise;
}

std::string Encoded(const JobRecord& record) {
  v1::Job job = ToProto(record);
  job.clear_steps();
  job.clear_unsaved();
  return job.SerializeAsString();
}

// Commits what the calls in between wrote, or rolls it back.
absl::Status InTransaction(sqlite3* db, const std::function<absl::Status()>& writes) {
  if (auto s = Exec(db, "BEGIN IMMEDIATE", "starting a write"); !s.ok()) return s;
  absl::Status s = writes();
  if (s.ok()) s = Exec(db, "COMMIT", "committing");
  if (!s.ok()) Exec(db, "ROLLBACK", "rolling back").IgnoreError();
  return s;
}

}  // namespace

absl::StatusOr<std::unique_ptr<JobDatabase>> JobDatabase::Open(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("--data-dir ", dir, ": cannot create it (", ec.message(), "); give a writable directory"));
  }
  const std::string lock_path = dir + "/coordinator.lock";
  const int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--data-dir ", dir, ": cannot open ", lock_path, " (", std::strerror(errno), ")"));
  }
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(lock_fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "--data-dir ", dir, " is in use by another coordinator (it holds ", lock_path,
        "); stop that one first, or give this one its own directory"));
  }
  const std::string path = dir + "/jobs.db";
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                                 nullptr);
  std::unique_ptr<JobDatabase> out(new JobDatabase(db, lock_fd, path));
  if (rc != SQLITE_OK) {
    return absl::FailedPreconditionError(absl::StrCat("--data-dir ", dir, ": cannot open ", path, ": ",
                                                      db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
  }
  sqlite3_busy_timeout(db, 5000);
  int64_t found = -1;
  {  // finalized before the pragmas below, which refuse to run inside its read
    Statement version(db, "PRAGMA user_version");
    if (version.Next()) found = version.Int(0);
    if (auto s = version.Check("reading the schema version"); !s.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(path, " is not a tpuemu job database: ", s.message()));
    }
  }
  if (found > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(path, " was written by a newer tpuemu (schema ", found,
                                                      ", this one reads up to ", kSchemaVersion,
                                                      "); run that version, or give another --data-dir"));
  }
  // temp_store: no temporary files, which a read-only root (Kubernetes) would refuse.
  for (const char* pragma : {"PRAGMA journal_mode = WAL", "PRAGMA synchronous = FULL", "PRAGMA temp_store = MEMORY"}) {
    if (auto s = Exec(db, pragma, pragma); !s.ok()) return absl::FailedPreconditionError(s.message());
  }
  if (auto s = Exec(db, kSchema, "creating the tables"); !s.ok()) return absl::FailedPreconditionError(s.message());
  // Written to a new file only: a coordinator starts on a full disk, and
  // says what the disk refuses later (JobStore).
  if (found == kSchemaVersion) return out;
  const std::string set_version = absl::StrCat("PRAGMA user_version = ", kSchemaVersion);
  if (auto s = Exec(db, set_version.c_str(), "setting the schema version"); !s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(path, " cannot be written (", s.message(),
                                                      "): free space, or give the coordinator a --data-dir it can "
                                                      "write"));
  }
  return out;
}

JobDatabase::~JobDatabase() {
  sqlite3_close_v2(db_);
  ::close(lock_fd_);  // and with it the lock
}

absl::StatusOr<JobDatabase::Contents> JobDatabase::Load() {
  Contents out;
  Statement jobs(db_, "SELECT number, record FROM jobs ORDER BY number");
  while (jobs.Next()) {
    const uint64_t number = jobs.Int(0);
    v1::Job job;
    if (!job.ParseFromString(jobs.Blob(1))) {
      out.unreadable.push_back(absl::StrCat("job number ", number, ": its record does not parse"));
      out.skipped_jobs[number] = "its record does not parse";
      continue;
    }
    auto record = RecordFromProto(job, number);
    if (!record.ok()) {
      out.unreadable.push_back(absl::StrCat(job.id(), ": ", record.status().message()));
      out.skipped_jobs[number] = std::string(record.status().message());
      continue;
    }
    Statement steps(db_, "SELECT step, report FROM steps WHERE number = ? ORDER BY step");
    steps.Bind(1, static_cast<int64_t>(number));
    while (steps.Next()) {
      v1::TrainStep step;
      if (record->steps.empty()) record->steps_dropped = steps.Int(0);
      if (!step.ParseFromString(steps.Blob(1))) {
        // Steps are kept contiguous, the first ones dropped (as retention
        // drops them): this one and those before it go, rather than showing
        // as a step of zeros.
        out.unreadable.push_back(absl::StrCat(job.id(), ": step ", steps.Int(0), " does not parse (it and the steps "
                                              "before it are not shown)"));
        record->steps.clear();
        record->steps_dropped = steps.Int(0) + 1;
        continue;
      }
      record->steps.push_back(StepFromProto(std::move(step)));
    }
    if (auto s = steps.Check(absl::StrCat("reading ", job.id(), "'s steps")); !s.ok()) return s;
    out.jobs.push_back(*std::move(record));
  }
  if (auto s = jobs.Check("reading the jobs"); !s.ok()) return s;
  const uint64_t after_last = out.jobs.empty() ? 1 : out.jobs.back().number + 1;
  out.next_number = std::max<uint64_t>(Counter(db_, "next_number", 1), after_last);
  out.finished_dropped = Counter(db_, "finished_dropped", 0);
  return out;
}

absl::Status JobDatabase::Add(const JobRecord& record, uint64_t next_number) {
  return InTransaction(db_, [&] {
    if (auto s = Put(record); !s.ok()) return s;
    return SetCounter(db_, "next_number", static_cast<int64_t>(next_number));
  });
}

absl::Status JobDatabase::Put(const JobRecord& record) {
  return Statement(db_, "INSERT INTO jobs (number, id, record) VALUES (?, ?, ?) "
                        "ON CONFLICT (number) DO UPDATE SET record = excluded.record")
      .Bind(1, static_cast<int64_t>(record.number))
      .Bind(2, record.id)
      .BindBlob(3, Encoded(record))
      .Run(absl::StrCat("recording ", record.id));
}

absl::Status JobDatabase::InsertStep(uint64_t number, int64_t index, const JobReport& step) {
  return Statement(db_, "INSERT OR REPLACE INTO steps (number, step, report) VALUES (?, ?, ?)")
      .Bind(1, static_cast<int64_t>(number))
      .Bind(2, index)
      .BindBlob(3, StepToProto(step).SerializeAsString())
      .Run(absl::StrCat("recording step ", index, " of job-", number));
}

absl::Status JobDatabase::PutStep(uint64_t number, int64_t index, const JobReport& step, int64_t keep_from) {
  return InTransaction(db_, [&] {
    const auto n = static_cast<int64_t>(number);
    if (auto s = InsertStep(number, index, step); !s.ok()) return s;
    return Statement(db_, "DELETE FROM steps WHERE number = ? AND step < ?")
        .Bind(1, n)
        .Bind(2, keep_from)
        .Run(absl::StrCat("dropping job-", number, "'s oldest steps"));
  });
}

absl::Status JobDatabase::DropStepsFrom(uint64_t number, int64_t from) {
  return Statement(db_, "DELETE FROM steps WHERE number = ? AND step >= ?")
      .Bind(1, static_cast<int64_t>(number))
      .Bind(2, from)
      .Run(absl::StrCat("dropping job-", number, "'s steps from ", from));
}

absl::Status JobDatabase::Drop(uint64_t number, uint64_t finished_dropped) {
  return InTransaction(db_, [&] {
    const auto n = static_cast<int64_t>(number);
    for (const char* sql : {"DELETE FROM steps WHERE number = ?", "DELETE FROM jobs WHERE number = ?"}) {
      if (auto s = Statement(db_, sql).Bind(1, n).Run(absl::StrCat("dropping job-", number)); !s.ok()) return s;
    }
    return SetCounter(db_, "finished_dropped", static_cast<int64_t>(finished_dropped));
  });
}

absl::Status JobDatabase::Rewrite(const JobRecord& record) {
  return InTransaction(db_, [&] {
    if (auto s = Put(record); !s.ok()) return s;
    auto s = Statement(db_, "DELETE FROM steps WHERE number = ?")
                 .Bind(1, static_cast<int64_t>(record.number))
                 .Run(absl::StrCat("dropping ", record.id, "'s steps"));
    for (size_t i = 0; s.ok() && i < record.steps.size(); ++i) {
      s = InsertStep(record.number, record.steps_dropped + static_cast<int64_t>(i), record.steps[i]);
    }
    return s;
  });
}

}  // namespace tpuemu
