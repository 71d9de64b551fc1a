// The janitor deletes a job's checkpoints only once the coordinator has called
// the job forgotten for the whole grace period without a break, never while
// the coordinator does not answer, and never anything it did not ask about.
// The coordinator here is a scripted answer: what the janitor does with the
// answers is the subject, and JobStoreTest covers how the coordinator gives
// them.
#include "worker/checkpoint_janitor.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "core/train/checkpoint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Answers ForgottenJobs from `forgotten` (an error while `down`), and records
// what it was asked.
struct ScriptedCoordinator : Registrar {
  std::set<uint64_t> forgotten;
  bool down = false;
  std::vector<std::vector<uint64_t>> asked;

  absl::StatusOr<GrantedPlace> RegisterWorker(const PlaceRequest&) override { return absl::UnimplementedError(""); }
  absl::Status Heartbeat(int, uint64_t, uint64_t) override { return absl::UnimplementedError(""); }
  absl::StatusOr<std::vector<uint64_t>> ForgottenJobs(const std::vector<uint64_t>& jobs) override {
    asked.push_back(jobs);
    if (down) return absl::UnavailableError("the coordinator is not answering");
    return std::vector<uint64_t>(forgotten.begin(), forgotten.end());
  }
};

class CheckpointJanitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("janitor-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    auto owned = std::make_unique<ScriptedCoordinator>();
    coordinator_ = owned.get();
    janitor_ = std::make_unique<CheckpointJanitor>(std::move(owned), dir_.string(), absl::Minutes(10));
  }
  void TearDown() override {
    janitor_.reset();
    fs::remove_all(dir_);
  }

  void Checkpoint(const std::string& job_dir) {
    fs::create_directories(dir_ / job_dir / "step-0");
    std::ofstream(dir_ / job_dir / "step-0" / "chip-0.ckpt") << "weights";
  }
  std::vector<uint64_t> Kept() const { return CheckpointedJobs(dir_.string()); }
  std::vector<uint64_t> Sweep(absl::Duration after) {
    auto deleted = janitor_->SweepOnce(t0_ + after);
    EXPECT_TRUE(deleted.ok()) << deleted.status();
    return deleted.ok() ? *deleted : std::vector<uint64_t>{};
  }

  fs::path dir_;
  ScriptedCoordinator* coordinator_ = nullptr;
  std::unique_ptr<CheckpointJanitor> janitor_;
  const absl::Time t0_ = absl::FromUnixSeconds(1'800'000'000);
};

TEST_F(CheckpointJanitorTest, AForgottenJobsCheckpointsGoOnlyAfterTheGracePeriod) {
  Checkpoint("job-3");
  Checkpoint("job-4");
  coordinator_->forgotten = {3};
  EXPECT_THAT(Sweep(absl::ZeroDuration()), IsEmpty());
  EXPECT_THAT(Sweep(absl::Minutes(9)), IsEmpty()) << "deleted before the grace period ended";
  EXPECT_THAT(Kept(), ElementsAre(3, 4));
  EXPECT_THAT(Sweep(absl::Minutes(10)), ElementsAre(3));
  EXPECT_THAT(Kept(), ElementsAre(4));
  EXPECT_THAT(coordinator_->asked.back(), ElementsAre(3, 4));
}

TEST_F(CheckpointJanitorTest, ABreakInTheCoordinatorsAnswerStartsTheGracePeriodOver) {
  Checkpoint("job-3");
  coordinator_->forgotten = {3};
  Sweep(absl::ZeroDuration());
  // A coordinator started without its job store, then again with it: the
  // job has a record again for one sweep.
  coordinator_->forgotten = {};
  Sweep(absl::Minutes(5));
  coordinator_->forgotten = {3};
  EXPECT_THAT(Sweep(absl::Minutes(11)), IsEmpty()) << "the clock did not start over after the break";
  EXPECT_THAT(Sweep(absl::Minutes(20)), IsEmpty());
  EXPECT_THAT(Sweep(absl::Minutes(21)), ElementsAre(3));
}

TEST_F(CheckpointJanitorTest, NothingGoesWhileTheCoordinatorDoesNotAnswer) {
  Checkpoint("job-3");
  coordinator_->forgotten = {3};
  Sweep(absl::ZeroDuration());
  coordinator_->down = true;
  auto deleted = janitor_->SweepOnce(t0_ + absl::Hours(1));
  EXPECT_EQ(deleted.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Kept(), ElementsAre(3));
  // An unanswered sweep is no break: the first answer after it may delete.
  coordinator_->down = false;
  EXPECT_THAT(Sweep(absl::Hours(2)), ElementsAre(3));
}

TEST_F(CheckpointJanitorTest, OnlyJobsItAskedAboutAndItsOwnDirectoriesAreTouched) {
  Checkpoint("job-3");
  Checkpoint("job-007");  // not a name the worker writes: not job 7's
  fs::create_directories(dir_ / "notes");
  coordinator_->forgotten = {3, 7, 9};
  Sweep(absl::ZeroDuration());
  EXPECT_THAT(coordinator_->asked.back(), ElementsAre(3));
  EXPECT_THAT(Sweep(absl::Hours(1)), ElementsAre(3));
  EXPECT_TRUE(fs::exists(dir_ / "job-007" / "step-0" / "chip-0.ckpt"));
  EXPECT_TRUE(fs::exists(dir_ / "notes"));
}

TEST_F(CheckpointJanitorTest, WithNoCheckpointsTheCoordinatorIsNotAsked) {
  EXPECT_THAT(Sweep(absl::ZeroDuration()), IsEmpty());
  Checkpoint("job-5");
  fs::remove_all(dir_ / "job-5");
  EXPECT_THAT(Sweep(absl::Minutes(1)), IsEmpty());
  EXPECT_THAT(coordinator_->asked, IsEmpty());
}

}  // namespace
}  // namespace tpuemu
