// The job store on disk: what a coordinator started again on the same
// --data-dir reads back (records bit for bit, running jobs interrupted,
// pending ones to queue again, numbers never reused, steps kept as they
// were), and the errors that name the directory.
#include "coordinator/job_database.h"

#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "coordinator/job_store.h"
#include "core/collective/report.h"
#include "core/collective/spec.h"
#include "core/train/report.h"
#include "gmock/gmock.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "gtest/gtest.h"
#include "services/job_proto.h"

namespace tpuemu {
namespace {

using ::testing::HasSubstr;

class JobDatabaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/tpuemu-jobdb-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<JobStore> OpenStore(JobRetention retention = {}) {
    auto db = JobDatabase::Open(dir_);
    EXPECT_TRUE(db.ok()) << db.status();
    return std::make_unique<JobStore>(retention, db.ok() ? *std::move(db) : nullptr);
  }

  static JobSpec AllGather(uint64_t bytes) {
    CollectiveSpec spec;
    spec.axes = {Axis::kX};
    spec.bytes = bytes;
    return JobSpec(spec);
  }

  // A collective job with `steps` step reports, 0 up.
  static void AddJobWithSteps(JobStore& store, int steps) {
    const std::string id = store.Add(AllGather(1 << 20))->id;
    for (int step = 0; step < steps; ++step) {
      StepReport s;
      s.step = step;
      store.AddStep(id, s);
    }
  }

  // Every record as users see it, bytes and all (maps in key order).
  static std::vector<std::string> Published(const JobStore& store) {
    std::vector<std::string> out;
    for (const JobRecord& r : store.List().jobs) {
      std::string bytes;
      google::protobuf::io::StringOutputStream stream(&bytes);
      google::protobuf::io::CodedOutputStream coded(&stream);
      coded.SetSerializationDeterministic(true);
      ToProto(r).SerializeToCodedStream(&coded);
      coded.Trim();
      out.push_back(bytes);
    }
    return out;
  }

  std::string dir_;
};

TEST_F(JobDatabaseTest, ARestartedStoreShowsEveryRecordBitForBit) {
  std::vector<std::string> before;
  {
    auto store = OpenStore();
    ASSERT_TRUE(store->Restore("unused").ok());
    const std::string done = store->Add(AllGather(1 << 20))->id;
    const std::string failed = store->Add(AllGather(2 << 20))->id;
    const std::string trained = store->Add(AllGather(3 << 20))->id;
    store->Update(done, [](JobRecord& r) {
      CollectiveReport report;
      report.op = "all-gather";
      report.emulated_s = 1.0 / 3;  // not exact in decimal: must come back as the same double
      report.predicted_s = 0.1 + 0.2;
      r.summary = report;
      r.worker_memory = {{0, 1000, 5000}, {1, 2000, 7000}};
      r.state = JobState::kSucceeded;
    });
    store->Update(failed, [](JobRecord& r) {
      r.state = JobState::kFailed;
      r.error = "worker host 1 was lost";
    });
    for (int step = 0; step < 3; ++step) {
      StepReport s;
      s.step = step;
      s.loss = 1.0 / (step + 7);
      store->AddStep(trained, s);
    }
    store->Update(trained, [](JobRecord& r) { r.state = JobState::kSucceeded; });
    before = Published(*store);
  }
  auto store = OpenStore();
  auto pending = store->Restore("unused");
  ASSERT_TRUE(pending.ok()) << pending.status();
  EXPECT_TRUE(pending->pending.empty());
  EXPECT_TRUE(pending->interrupted.empty());
  EXPECT_EQ(Published(*store), before);
  const JobRecord trained = *store->Get("job-3");
  EXPECT_EQ(trained.steps.size(), 3u);
  EXPECT_EQ(trained.spec.get<CollectiveSpec>()->bytes, 3u << 20);
}

TEST_F(JobDatabaseTest, RunningJobsComeBackInterruptedAndPendingOnesToQueueAgain) {
  {
    auto store = OpenStore();
    ASSERT_TRUE(store->Restore("unused").ok());
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(store->Add(AllGather(1 << 20)).ok());
    store->Update("job-1", [](JobRecord& r) { r.state = JobState::kRunning; });
  }  // as if killed: nothing more is written
  auto store = OpenStore();
  auto pending = store->Restore("the coordinator stopped while it ran");
  ASSERT_TRUE(pending.ok()) << pending.status();
  ASSERT_EQ(pending->pending.size(), 2u);
  EXPECT_EQ(pending->pending[0].id, "job-2");
  EXPECT_EQ(pending->pending[1].id, "job-3");
  ASSERT_EQ(pending->interrupted.size(), 1u);
  EXPECT_EQ(pending->interrupted[0].id, "job-1");
  const JobRecord interrupted = *store->Get("job-1");
  EXPECT_EQ(interrupted.state, JobState::kInterrupted);
  EXPECT_EQ(interrupted.error, "the coordinator stopped while it ran");
  EXPECT_GT(interrupted.finished_unix_s, 0);
  EXPECT_EQ(store->Add(AllGather(1 << 20))->id, "job-4");
}

// Writes the file refuses (here a trigger of SQLite's own, as a full disk
// would refuse them): the records in memory stay right and say their copy
// on disk is behind, and once the file takes writes again the store writes
// them whole, so a coordinator started after sees what clients were told.
TEST_F(JobDatabaseTest, ChangesTheFileRefusedAreWrittenOnceItTakesThemAgain) {
  auto store = OpenStore();
  ASSERT_TRUE(store->Restore("unused").ok());
  AddJobWithSteps(*store, 2);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/jobs.db").c_str(), &db), SQLITE_OK);
  const auto exec = [&](const char* sql) { ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK); };
  exec("CREATE TRIGGER full_steps BEFORE INSERT ON steps BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;"
       "CREATE TRIGGER full_jobs BEFORE UPDATE ON jobs BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;");
  for (int step = 2; step < 4; ++step) {
    StepReport s;
    s.step = step;
    store->AddStep("job-1", s);
  }
  store->Update("job-1", [](JobRecord& r) { r.state = JobState::kCancelled; });
  const JobRecord told = *store->Get("job-1");
  EXPECT_EQ(told.state, JobState::kCancelled);
  EXPECT_THAT(told.unsaved, HasSubstr("database or disk is full"));
  EXPECT_THAT(told.unsaved, HasSubstr(dir_ + "/jobs.db"));
  EXPECT_TRUE(store->Get("job-1")->unsaved == store->List().jobs[0].unsaved);
  store->CatchUp();  // the file still refuses
  EXPECT_FALSE(store->Get("job-1")->unsaved.empty());

  exec("DROP TRIGGER full_steps; DROP TRIGGER full_jobs;");
  sqlite3_close(db);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // the store tries again once a second
  store->CatchUp();
  EXPECT_EQ(store->Get("job-1")->unsaved, "");
  const std::vector<std::string> before = Published(*store);
  store.reset();  // as if killed now

  auto again = OpenStore();
  ASSERT_TRUE(again->Restore("unused").ok());
  EXPECT_EQ(Published(*again), before);
  EXPECT_EQ(again->Get("job-1")->steps.size(), 4u);
}

// A job resumed by the user joins the queue then, behind the jobs of its
// priority already queued: a restarted coordinator queues it there again,
// not by its (older) submit number.
TEST_F(JobDatabaseTest, PendingJobsComeBackInTheOrderTheyJoinedTheQueue) {
  {
    auto store = OpenStore();
    ASSERT_TRUE(store->Restore("unused").ok());
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(store->Add(AllGather(1 << 20)).ok());
    store->Update("job-1", [](JobRecord& r) {
      r.state = JobState::kPending;
      r.queued_unix_s = r.submitted_unix_s + 3600;  // resumed an hour later
    });
  }
  auto store = OpenStore();
  auto restored = store->Restore("unused");
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_EQ(restored->pending.size(), 3u);
  EXPECT_EQ(restored->pending[0].id, "job-2");
  EXPECT_EQ(restored->pending[1].id, "job-3");
  EXPECT_EQ(restored->pending[2].id, "job-1");
}

// A file SQLite cannot read stops the coordinator with its path and what to do.
TEST_F(JobDatabaseTest, AFileThatCannotBeReadIsNamedWithWhatToDo) {
  {
    auto store = OpenStore();
    ASSERT_TRUE(store->Restore("unused").ok());
    for (int i = 0; i < 200; ++i) AddJobWithSteps(*store, 3);
  }
  {  // a page of the jobs table overwritten, past the header and schema
    FILE* f = std::fopen((dir_ + "/jobs.db").c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    std::fseek(f, 0, SEEK_END);
    const long size = std::ftell(f);
    ASSERT_GT(size, 8 * 4096);
    for (long page = 2; page * 4096 < size; page += 2) {
      std::fseek(f, page * 4096, SEEK_SET);
      const std::string junk(64, '\xff');
      std::fwrite(junk.data(), 1, junk.size(), f);
    }
    std::fclose(f);
  }
  auto store = OpenStore();
  auto restored = store->Restore("unused");
  ASSERT_FALSE(restored.ok());
  EXPECT_THAT(restored.status().message(), HasSubstr(dir_ + "/jobs.db"));
  EXPECT_THAT(restored.status().message(), HasSubstr("move it aside"));
}

TEST_F(JobDatabaseTest, NumbersAreNeverReusedEvenWhenTheNewestRecordsWereDropped) {
  JobRetention retention;
  retention.finished_jobs = 1;
  {
    auto store = OpenStore(retention);
    ASSERT_TRUE(store->Restore("unused").ok());
    for (int i = 1; i <= 3; ++i) {
      const std::string id = store->Add(AllGather(1 << 20))->id;
      store->Update(id, [](JobRecord& r) { r.state = JobState::kCancelled; });
    }
  }
  auto store = OpenStore(retention);
  ASSERT_TRUE(store->Restore("unused").ok());
  const JobStore::Listing listing = store->List();
  ASSERT_EQ(listing.jobs.size(), 1u);
  EXPECT_EQ(listing.jobs[0].id, "job-3");
  EXPECT_EQ(listing.finished_dropped, 2u);
  EXPECT_THAT(store->Get("job-1").status().message(), HasSubstr("keeps the last 1 finished jobs"));
  EXPECT_EQ(store->Add(AllGather(1 << 20))->id, "job-4");
}

TEST_F(JobDatabaseTest, KeepsTheLatestStepsOnDiskAsInMemory) {
  JobRetention retention;
  retention.step_records_per_job = 2;
  {
    auto store = OpenStore(retention);
    ASSERT_TRUE(store->Restore("unused").ok());
    AddJobWithSteps(*store, 5);
  }
  auto store = OpenStore(retention);
  ASSERT_TRUE(store->Restore("unused").ok());
  const v1::Job job = ToProto(*store->Get("job-1"));
  EXPECT_EQ(job.steps_dropped(), 3);
  ASSERT_EQ(job.steps_size(), 2);
  EXPECT_EQ(job.steps(0).step(), 3);
  EXPECT_EQ(job.steps(1).step(), 4);
}

// Rows damaged in the file: a step that does not parse is not shown as a
// step of zeros (it and those before it count as dropped), and a record that
// does not parse is said as such, not as one retention dropped.
TEST_F(JobDatabaseTest, DamagedRowsAreLeftOutAndSaidAsSuch) {
  {
    auto store = OpenStore();
    ASSERT_TRUE(store->Restore("unused").ok());
    AddJobWithSteps(*store, 5);
    ASSERT_TRUE(store->Add(AllGather(1 << 20)).ok());
  }
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ + "/jobs.db").c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "UPDATE steps SET report = x'ffffffff' WHERE number = 1 AND step = 2", nullptr, nullptr,
                           nullptr),
              SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "UPDATE jobs SET record = x'ffffffff' WHERE number = 2", nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  auto store = OpenStore();
  ASSERT_TRUE(store->Restore("unused").ok());
  const v1::Job job = ToProto(*store->Get("job-1"));
  EXPECT_EQ(job.steps_dropped(), 3);
  ASSERT_EQ(job.steps_size(), 2);
  EXPECT_EQ(job.steps(0).step(), 3);
  auto damaged = store->Get("job-2");
  ASSERT_FALSE(damaged.ok());
  EXPECT_THAT(damaged.status().message(), HasSubstr("could not be read when the coordinator started"));
  // Its checkpoints are not the workers' to delete: its row may be mended.
  EXPECT_FALSE(store->Forgotten(2));
}

TEST_F(JobDatabaseTest, OneCoordinatorPerDirectory) {
  auto first = JobDatabase::Open(dir_);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = JobDatabase::Open(dir_);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr("is in use by another coordinator"));
  EXPECT_THAT(second.status().message(), HasSubstr(dir_));
  first->reset();
  EXPECT_TRUE(JobDatabase::Open(dir_).ok());  // the lock went with the first
}

TEST_F(JobDatabaseTest, RefusesAFileFromANewerVersionAndADirectoryItCannotCreate) {
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ + "/jobs.db").c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version = 99", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  auto newer = JobDatabase::Open(dir_);
  ASSERT_FALSE(newer.ok());
  EXPECT_THAT(newer.status().message(), HasSubstr("written by a newer tpuemu (schema 99"));

  const std::string file = dir_ + "/a-file";
  std::fclose(std::fopen(file.c_str(), "w"));
  auto bad = JobDatabase::Open(file + "/data");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("--data-dir " + file + "/data: cannot create it"));
}

TEST_F(JobDatabaseTest, TheFilePassesSqlitesIntegrityCheck) {
  {
    auto store = OpenStore();
    ASSERT_TRUE(store->Restore("unused").ok());
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(store->Add(AllGather(1 << 20)).ok());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/jobs.db").c_str(), &db), SQLITE_OK);
  sqlite3_stmt* check = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &check, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(check), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(check, 0)), "ok");
  sqlite3_finalize(check);
  sqlite3_close(db);
}

}  // namespace
}  // namespace tpuemu
