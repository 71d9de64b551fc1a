// The coordinator's job records without a pod: numbering, what is kept of
// finished jobs and steps, and waiting for a record to change.
#include "coordinator/job_store.h"

#include <thread>

#include "core/collective/spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

using ::testing::HasSubstr;

JobSpec AllGather() { return JobSpec(CollectiveSpec{}); }

void Finish(JobStore& store, const std::string& id) {
  store.Update(id, [](JobRecord& r) { r.state = JobState::kSucceeded; });
}

TEST(JobStoreTest, JobsAreNumberedInSubmitOrderAndListedOldestFirst) {
  JobStore store(JobRetention{});
  const JobRecord first = *store.Add(AllGather());
  const JobRecord second = *store.Add(AllGather());
  EXPECT_EQ(first.id, "job-1");
  EXPECT_EQ(second.id, "job-2");
  EXPECT_EQ(first.state, JobState::kPending);
  EXPECT_GT(first.submitted_unix_s, 0);
  EXPECT_EQ(first.spec.kind(), "collective");
  const JobStore::Listing listing = store.List();
  ASSERT_EQ(listing.jobs.size(), 2u);
  EXPECT_EQ(listing.jobs[0].id, "job-1");
  EXPECT_EQ(listing.jobs[1].id, "job-2");
}

TEST(JobStoreTest, KeepsTheLatestFinishedJobsAndSaysWhyAnOlderOneIsGone) {
  JobRetention retention;
  retention.finished_jobs = 2;
  JobStore store(retention);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(store.Add(AllGather()).ok());
  const JobRecord running = *store.Add(AllGather());
  store.Update(running.id, [](JobRecord& r) { r.state = JobState::kRunning; });
  for (const char* id : {"job-1", "job-2", "job-3"}) Finish(store, id);

  const JobStore::Listing listing = store.List();
  ASSERT_EQ(listing.jobs.size(), 3u);  // two finished, and the running one
  EXPECT_EQ(listing.jobs[0].id, "job-2");
  EXPECT_EQ(listing.finished_dropped, 1u);
  EXPECT_EQ(listing.finished_kept, 2);
  EXPECT_GT(listing.jobs[0].finished_unix_s, 0);
  EXPECT_THAT(store.Get("job-1").status().message(), HasSubstr("keeps the last 2 finished jobs"));
  EXPECT_THAT(store.Get("job-9").status().message(), HasSubstr("does not exist"));
  EXPECT_TRUE(store.Get("job-4").ok());
  // What workers may delete the checkpoints of (worker/checkpoint_janitor.h):
  // a job whose record went, not one that runs, may resume, or was never given.
  const std::string cancelled = store.Add(AllGather())->id;  // job-5
  store.Update(cancelled, [](JobRecord& r) { r.state = JobState::kCancelled; });
  EXPECT_TRUE(store.Forgotten(1));   // its record dropped
  EXPECT_TRUE(store.Forgotten(3));   // succeeded: nothing resumes it
  EXPECT_FALSE(store.Forgotten(4));  // running
  EXPECT_FALSE(store.Forgotten(5));  // cancelled and kept: `tpuemu resume` may take it
  EXPECT_FALSE(store.Forgotten(9));  // never given by this store: another's
  EXPECT_FALSE(store.Forgotten(0));
  // The count of finished jobs keeps the dropped one (tpuemu_jobs_finished_total),
  // and a record changed again after it finished counts once.
  store.Update("job-3", [](JobRecord& r) { r.error = "seen again"; });
  const JobStore::Listing after = store.List();
  EXPECT_EQ(after.finished_here.at(JobState::kSucceeded), 3u);
  EXPECT_EQ(after.finished_here.at(JobState::kCancelled), 1u);
  EXPECT_EQ(after.finished_here.count(JobState::kFailed), 0u);
  // Resumed, then failing: an ending of its own.
  store.Rewind(cancelled, 0, [](JobRecord& r) { r.state = JobState::kPending; });
  store.Update(cancelled, [](JobRecord& r) { r.state = JobState::kFailed; });
  EXPECT_EQ(store.List().finished_here.at(JobState::kFailed), 1u);
  EXPECT_EQ(store.List().finished_here.at(JobState::kCancelled), 1u);
}

TEST(JobStoreTest, KeepsTheLatestStepRecords) {
  JobRetention retention;
  retention.step_records_per_job = 3;
  JobStore store(retention);
  const std::string id = store.Add(AllGather())->id;
  for (int step = 0; step < 5; ++step) store.AddStep(id, JobReport(step));
  const JobRecord r = *store.Get(id);
  ASSERT_EQ(r.steps.size(), 3u);
  EXPECT_EQ(r.steps_dropped, 2);
  EXPECT_EQ(std::any_cast<int>(r.steps.front()), 2);  // steps[0] is step steps_dropped
}

TEST(JobStoreTest, AWaitReturnsOnceTheRecordChanges) {
  JobStore store(JobRetention{});
  const std::string id = store.Add(AllGather())->id;
  auto now = store.Wait(id, /*after_version=*/-1, absl::Seconds(5));
  ASSERT_TRUE(now.ok());
  const int64_t version = now->second;
  EXPECT_EQ(store.Wait(id, version, absl::Milliseconds(50))->second, version);  // nothing new: timed out

  std::thread runner([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    store.Update(id, [](JobRecord& r) { r.state = JobState::kRunning; });
  });
  auto changed = store.Wait(id, version, absl::Seconds(10));
  runner.join();
  ASSERT_TRUE(changed.ok());
  EXPECT_NE(changed->second, version);
  EXPECT_EQ(changed->first.state, JobState::kRunning);
}

TEST(JobStoreTest, OnlyTracedKindsHaveTraces) {
  JobStore store(JobRetention{});
  const std::string id = store.Add(AllGather())->id;
  auto trace = store.ReadTrace(id);
  EXPECT_EQ(trace.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(trace.status().message(), HasSubstr("is a collective job"));
}

}  // namespace
}  // namespace tpuemu
