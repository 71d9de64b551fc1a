// Training checkpoints: when they are due, the files (written whole, read
// back checked, older ones dropped), and a resumed in-process run that ends
// with the parameters and losses of an uninterrupted one, bit for bit.
#include "core/train/checkpoint.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/wire/run_number.h"
#include "core/job/inprocess_pod.h"
#include "core/train/host.h"
#include "core/train/job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

using ::testing::HasSubstr;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/tpuemu-ckpt-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(CheckpointTest, DueEveryNStepsButNotAfterTheLast) {
  TrainConfig c;
  c.steps = 10;
  c.checkpoint_every = 4;
  std::vector<int> due;
  for (int step = 0; step < c.steps; ++step) {
    if (CheckpointDue(c, step)) due.push_back(step);
  }
  EXPECT_EQ(due, (std::vector<int>{3, 7}));  // after 4 and 8 steps
  c.checkpoint_every = 0;
  for (int step = 0; step < c.steps; ++step) EXPECT_FALSE(CheckpointDue(c, step));
}

TEST_F(CheckpointTest, AFileReadsBackAsWrittenAndOlderStepsGo) {
  const std::string state("\x01\x02\x00\xff state bytes", 17);
  ASSERT_TRUE(WriteCheckpoint(dir_, 7, 4, 3, "old", 0).ok());
  ASSERT_TRUE(WriteCheckpoint(dir_, 7, 8, 3, state, /*keep_from=*/8).ok());
  auto read = ReadCheckpoint(dir_, 7, 8, 3);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, state);
  EXPECT_FALSE(std::filesystem::exists(CheckpointPath(dir_, 7, 4, 3)));
  EXPECT_FALSE(std::filesystem::exists(CheckpointPath(dir_, 7, 8, 3) + ".tmp"));
  RemoveCheckpoints(dir_, 7);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/job-7"));
}

// What a worker's checkpoint janitor asks the coordinator about: job
// directories only, whatever else the directory holds.
TEST_F(CheckpointTest, TheJobsWithCheckpointsAreTheJobDirectories) {
  EXPECT_TRUE(CheckpointedJobs(dir_ + "/missing").empty());
  ASSERT_TRUE(WriteCheckpoint(dir_, 12, 4, 0, "a", 0).ok());
  ASSERT_TRUE(WriteCheckpoint(dir_, 3, 2, 1, "b", 0).ok());
  std::filesystem::create_directory(dir_ + "/job-x");
  std::filesystem::create_directory(dir_ + "/job-007");
  std::filesystem::create_directory(dir_ + "/other");
  std::ofstream(dir_ + "/job-5") << "a file, not a job's directory";
  EXPECT_EQ(CheckpointedJobs(dir_), (std::vector<uint64_t>{3, 12}));
}

TEST_F(CheckpointTest, AMissingOrDamagedFileIsAnErrorNamingIt) {
  auto missing = ReadCheckpoint(dir_, 7, 8, 3);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(CheckpointPath(dir_, 7, 8, 3)));

  ASSERT_TRUE(WriteCheckpoint(dir_, 7, 8, 3, std::string(1000, 'x'), 8).ok());
  {
    std::fstream f(CheckpointPath(dir_, 7, 8, 3), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('y');  // one byte of the state changed
  }
  auto damaged = ReadCheckpoint(dir_, 7, 8, 3);
  EXPECT_EQ(damaged.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(damaged.status().message(), HasSubstr("is damaged"));
  // Another chip's file under this chip's name is refused too.
  ASSERT_TRUE(WriteCheckpoint(dir_, 7, 8, 4, "z", 8).ok());
  std::filesystem::copy_file(CheckpointPath(dir_, 7, 8, 4), CheckpointPath(dir_, 7, 8, 3),
                             std::filesystem::copy_options::overwrite_existing);
  EXPECT_EQ(ReadCheckpoint(dir_, 7, 8, 3).status().code(), absl::StatusCode::kDataLoss);
}

// What a run leaves: every step's loss sum and the final parameters.
struct Trained {
  std::vector<double> losses;
  std::vector<double> params;
};

// Runs steps [from, to) of `job` on one in-process host (all its chips),
// reading the checkpoint after `from` steps when from > 0.
Trained RunSteps(const TrainJob& job, const Topology& topo, const std::string& dir, uint64_t run, int from, int to) {
  InProcessPod pod(topo, 0);
  HostTrainer trainer(job.config, job.mesh, pod.network(), run, std::make_shared<JobAbort>(),
                      TrainCheckpoints{dir, from});
  Trained t;
  const absl::Status prepared = trainer.Prepare();
  EXPECT_TRUE(prepared.ok()) << prepared;
  if (!prepared.ok()) return t;
  for (int step = from; step < to; ++step) {
    auto chips = trainer.Run(step);
    EXPECT_TRUE(chips.ok()) << chips.status();
    if (!chips.ok()) return t;
    double loss = 0;
    for (const ChipRunResult& c : *chips) loss += c.loss_sum;
    t.losses.push_back(loss);
  }
  // Checked (which drops the job's checkpoints) only once every step ran.
  if (to == job.config.steps) {
    for (const ChipCheck& c : trainer.Check()) t.params.push_back(c.param_squares);
  }
  return t;
}

// A job file's text planned on `topo`.
absl::StatusOr<TrainJob> Planned(const std::string& text, const Topology& topo) {
  auto spec = ParseTrainSpec(text, "ck.yaml");
  if (!spec.ok()) return spec.status();
  return PlanTrainJob(*spec, topo, 0);
}

// Runs `job_text` (7 steps, checkpoints every 3) whole, and stopped after 4
// steps then resumed from step 3 as another attempt: the same losses and
// parameters, bit for bit.
void ExpectResumedEqualsWhole(const std::string& dir, const std::string& job_text) {
  auto topo = Topology::Create({"v5p:2x4", 1, 8, "auto"});
  ASSERT_TRUE(topo.ok());
  auto job = Planned(job_text, *topo);
  ASSERT_TRUE(job.ok()) << job.status();
  const Trained whole = RunSteps(*job, *topo, dir + "/whole", RunNumber(1, 0), 0, 7);
  const Trained first = RunSteps(*job, *topo, dir + "/split", RunNumber(1, 0), 0, 4);
  ASSERT_TRUE(std::filesystem::exists(CheckpointPath(dir + "/split", 1, 3, 0)));
  const Trained rest = RunSteps(*job, *topo, dir + "/split", RunNumber(1, 1), 3, 7);
  ASSERT_EQ(whole.losses.size(), 7u);
  std::vector<double> resumed(first.losses.begin(), first.losses.begin() + 3);
  resumed.insert(resumed.end(), rest.losses.begin(), rest.losses.end());
  EXPECT_EQ(resumed, whole.losses);  // exact, not near
  EXPECT_EQ(rest.params, whole.params);
  // A job that ran every step leaves no checkpoint behind.
  EXPECT_FALSE(std::filesystem::exists(dir + "/split/job-1"));
}

// The embedding and the vocabulary projection (first and last layer) with
// their moments are in the checkpoint too.
TEST_F(CheckpointTest, AResumedVocabularyModelEndsBitForBitAsAnUninterruptedOne) {
  ExpectResumedEqualsWhole(dir_,
                           "name: ck\nici_fsdp_parallelism: 2\nici_tensor_parallelism: 4\nemb_dim: 32\nmlp_dim: 64\n"
                           "num_layers: 2\nvocab_size: 64\nglobal_batch_tokens: 64\nsteps: 7\nseed: 5\n"
                           "learning_rate: 0.01\ncheckpoint_every: 3\n");
}

TEST_F(CheckpointTest, AResumedRunEndsBitForBitAsAnUninterruptedOne) {
  const std::string text =
      "name: ck\nici_data_parallelism: 2\nici_fsdp_parallelism: 4\nemb_dim: 64\nmlp_dim: 256\nnum_layers: 2\n"
      "global_batch_tokens: 128\nsteps: 7\nseed: 5\nopt_type: adam\nlearning_rate: 0.01\ncheckpoint_every: 3\n";
  ExpectResumedEqualsWhole(dir_, text);
  auto topo = Topology::Create({"v5p:2x4", 1, 8, "auto"});
  ASSERT_TRUE(topo.ok());
  auto job = Planned(text, *topo);
  ASSERT_TRUE(job.ok()) << job.status();

  // From a checkpoint of another mesh: refused, not trained on garbage.
  auto other_job = Planned(
      "name: ck\nici_data_parallelism: 8\nici_fsdp_parallelism: 1\nemb_dim: 64\nmlp_dim: 256\nnum_layers: 2\n"
      "global_batch_tokens: 128\nsteps: 7\nseed: 5\ncheckpoint_every: 3\n",
      *topo);
  ASSERT_TRUE(other_job.ok()) << other_job.status();
  RunSteps(*job, *topo, dir_ + "/mesh", RunNumber(2, 0), 0, 4);
  InProcessPod pod(*topo, 0);
  HostTrainer wrong(other_job->config, other_job->mesh, pod.network(), RunNumber(2, 1), std::make_shared<JobAbort>(),
                    TrainCheckpoints{dir_ + "/mesh", 3});
  const absl::Status refused = wrong.Prepare();
  EXPECT_EQ(refused.code(), absl::StatusCode::kDataLoss) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("another mesh"));
}

}  // namespace
}  // namespace tpuemu
