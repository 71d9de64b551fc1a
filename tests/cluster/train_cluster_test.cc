// Training jobs over real gRPC: workers keep their shards between steps, the
// coordinator publishes every step, and the losses and final parameters equal
// the one-device reference; cancel stops a job within a step and leaves the
// pod usable.
#include <cmath>
#include <filesystem>
#include <tuple>
#include <functional>
#include <set>
#include <thread>

#include "core/train/model.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "services/train_proto.h"
#include "tests/cluster/test_pod.h"
#include "tests/cluster/train_jobs.h"
#include "tpuemu/v1/services.grpc.pb.h"

namespace tpuemu {
namespace {

TEST(TrainClusterTest, StrategiesAcrossWorkersEqualOneDevice) {
  TestPod pod({"v5p:2x4", 2, 4, "auto"}, 0);  // 16 chips, 4 workers, 2 slices
  for (const std::string mesh : {"ici_data_parallelism: -1\nici_fsdp_parallelism: 1\n",  // DP everywhere
                                 "ici_fsdp_parallelism: -1\n",                               // FSDP in, DP across
                                 "ici_fsdp_parallelism: 2\nici_tensor_parallelism: 4\n"}) {  // FSDP + TP
    const TrainSpec spec = Job(mesh, 3);
    ExpectEqualsReference(pod.Run(spec), spec);
  }
  const TrainSpec sgd = Job("ici_fsdp_parallelism: 1\nici_tensor_parallelism: -1\n", 3, "sgd");
  ExpectEqualsReference(pod.Run(sgd), sgd);
}

TEST(TrainClusterTest, PipelinesAcrossWorkersEqualOneDevice) {
  TestPod pod({"v5p:2x4", 2, 4, "auto"}, 0);  // each worker a 2x2 block: stages 1 and 2 on different workers
  struct Case {
    std::string mesh;
    int stages, microbatches, repeats;
  };
  const Case cases[] = {
      {"ici_pipeline_parallelism: 4\nici_fsdp_parallelism: 2\nnum_layers: 4\n", 4, 4, 1},  // DP over DCN
      {"ici_fsdp_parallelism: -1\ndcn_data_parallelism: 1\ndcn_pipeline_parallelism: 2\npipeline_schedule: 1f1b\n"
       "num_layers: 2\n",
       2, 4, 1},
      {"ici_pipeline_parallelism: 4\nici_fsdp_parallelism: 2\npipeline_schedule: circular\nnum_pipeline_repeats: 2\n"
       "num_layers: 8\npipeline_fsdp_ag_once: true\n",
       4, 4, 2},
  };
  for (const Case& c : cases) {
    const TrainSpec spec = Parsed(c.mesh + "num_pipeline_microbatches: 4\nemb_dim: 32\nmlp_dim: 64\n"
                                           "global_batch_tokens: 64\nseed: 5\nsteps: 2\nopt_type: sgd\nlearning_rate: 20\n",
                                  "pp.yaml");
    const v1::Job job = pod.Run(spec);
    ExpectEqualsReference(job, spec);
    const v1::TrainSummary& summary = job.train_summary();
    EXPECT_EQ(summary.stages(), c.stages);
    EXPECT_EQ(summary.microbatches(), c.microbatches);
    EXPECT_EQ(summary.repeats(), c.repeats);
    for (const v1::TrainStep& step : job.steps()) {
      EXPECT_DOUBLE_EQ(step.bubble_formula(), (c.stages - 1.0) / (c.repeats * c.microbatches + c.stages - 1));
      EXPECT_GT(step.bubble_fraction(), 0);
      EXPECT_LT(step.bubble_fraction(), 1);
      EXPECT_GT(step.peak_activation_bytes(), 0u);
      EXPECT_GT(step.comm_bytes_per_chip().at("pipeline"), 0u);
    }
  }
}

TEST(TrainClusterTest, BadJobFilesAreRefusedAtSubmit) {
  TestPod pod({"v5p:2x4", 1, 4, "auto"}, 0);
  struct Case {
    std::string yaml;
    const char* says;
  };
  const Case cases[] = {
      {"ici_data_parallelism: 3\nemb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\n", "must divide the chips per slice"},
      {"topology: v5e:4x4\nemb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\n", "the pod is v5p:2x4"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 12\n", "global_batch_tokens: 12 does not split over the 8"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nbatch: 3\n", "unknown key"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\ntime_scale: 100\n", "the pod runs at `time_scale` 0"},
      {"emb_dim: 4096\nmlp_dim: 16384\nnum_layers: 3\nglobal_batch_tokens: 8\n", "MiB of host memory (limit 12288"},
      {"emb_dim: 1024\nmlp_dim: 4096\nnum_layers: 4\nglobal_batch_tokens: 8\nici_fsdp_parallelism: 1\n"
       "ici_data_parallelism: -1\nhbm_bytes: 1e8\n",
       "out of memory: each chip needs 384 MiB but has 95.37 MiB of HBM (hbm_bytes)"},
      {"emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\nici_pipeline_parallelism: 4\nnum_layers: 3\n",
       "num_layers: 3 layers do not split into 4 stage(s)"},
  };
  for (const Case& c : cases) {
    // As `tpuemu submit` does: what the file itself gets wrong fails
    // reading it, what the pod refuses fails the submit.
    auto spec = ParseTrainSpec(c.yaml, "bad.yaml");
    auto job = spec.ok() ? pod.Submit(*spec) : absl::StatusOr<v1::Job>(spec.status());
    ASSERT_FALSE(job.ok()) << c.yaml;
    EXPECT_THAT(std::string(job.status().message()), testing::HasSubstr(c.says)) << job.status();
  }
  EXPECT_TRUE(pod.coordinator().ListJobs().jobs().empty());
}

// A client other than the CLI sends the typed spec straight over gRPC: the
// coordinator refuses what a job file with those values is refused for, with
// the same words, and queues nothing.
TEST(TrainClusterTest, ATypedSpecOverGrpcIsCheckedAsAJobFileIs) {
  TestPod pod({"v5p:2x4", 1, 4, "auto"}, 0);
  auto stub = v1::CoordinatorService::NewStub(
      grpc::CreateChannel(pod.ServeCoordinator(), grpc::InsecureChannelCredentials()));
  const std::string sizes = "emb_dim: 8\nmlp_dim: 8\nglobal_batch_tokens: 8\n";
  struct Case {
    std::function<void(v1::TrainConfig&)> set;
    std::string yaml;  // a job file with the same value
  };
  const Case cases[] = {
      {[](v1::TrainConfig& c) { c.set_emb_dim(0); }, "emb_dim: 0\nmlp_dim: 8\nglobal_batch_tokens: 8\n"},
      {[](v1::TrainConfig& c) { c.set_steps(-3); }, sizes + "steps: -3\n"},
      {[](v1::TrainConfig& c) { c.set_pipeline_schedule("foo"); }, sizes + "pipeline_schedule: foo\n"},
      {[](v1::TrainConfig& c) { c.mutable_ici()->set_fsdp(-7); }, sizes + "ici_fsdp_parallelism: -7\n"},
      {[](v1::TrainConfig& c) { c.set_adam_eps(0); }, sizes + "adam_eps: 0\n"},
      {[](v1::TrainConfig& c) { c.set_adam_eps(2); }, sizes + "adam_eps: 2\n"},
  };
  const TrainSpec good = Parsed(sizes, "typed.yaml");
  for (const Case& c : cases) {
    v1::SubmitJobRequest request;
    *request.mutable_train() = ToProto(good);
    c.set(*request.mutable_train()->mutable_config());
    grpc::ClientContext context;
    v1::Job job;
    const grpc::Status status = stub->SubmitJob(&context, request, &job);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.yaml;
    auto file = ParseTrainSpec(c.yaml, "typed.yaml");
    ASSERT_FALSE(file.ok()) << c.yaml;
    EXPECT_EQ(status.error_message(), file.status().message());
  }
  // A spec with no config at all: every field 0 or empty.
  v1::SubmitJobRequest empty;
  empty.mutable_train()->set_source("typed.yaml");
  grpc::ClientContext context;
  v1::Job job;
  const grpc::Status status = stub->SubmitJob(&context, empty, &job);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "typed.yaml: name: empty; give the job a label");
  EXPECT_TRUE(pod.coordinator().ListJobs().jobs().empty());
}

TEST(TrainClusterTest, CancelStopsWithinAStepAndThePodRunsTheNextJob) {
  TestPod pod({"v5p:2x4", 1, 4, "auto"}, 0);
  auto job = pod.Submit(Job("ici_fsdp_parallelism: -1\n", 100000));
  ASSERT_TRUE(job.ok()) << job.status();
  // Wait for the first step, then cancel.
  int64_t version = -1;
  while (true) {
    auto next = pod.coordinator().WaitJob(job->id(), version, absl::Seconds(5));
    ASSERT_TRUE(next.ok());
    version = next->second;
    if (next->first.steps_size() > 0) break;
  }
  const auto asked = std::chrono::steady_clock::now();
  ASSERT_TRUE(pod.coordinator().CancelJob(job->id()).ok());
  const v1::Job done = pod.Wait(job->id());
  EXPECT_EQ(done.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_LT(std::chrono::steady_clock::now() - asked, std::chrono::seconds(2));
  EXPECT_LT(done.steps_size(), 100000);
  const TrainSpec next = Job("ici_fsdp_parallelism: -1\n", 2);
  ExpectEqualsReference(pod.Run(next), next);
}

TEST(TrainClusterTest, ACancelledJobResumesFromItsCheckpointBitForBit) {
  TestPod pod({"v5p:2x4", 1, 4, "auto"}, 0);
  char pattern[] = "/tmp/tpuemu-cluster-ckpt-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string dir = pattern;
  for (int host = 0; host < 2; ++host) pod.node(host).set_checkpoint_dir(dir);
  const TrainSpec spec = Job("ici_fsdp_parallelism: -1\ncheckpoint_every: 5\n", 300);
  const v1::Job whole = pod.Run(spec);
  ASSERT_EQ(whole.state(), v1::JOB_STATE_SUCCEEDED) << whole.error();

  auto job = pod.Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  int64_t version = -1;
  v1::Job seen;
  // Past a checkpoint by a step or more: the resumed run does those steps again.
  while (seen.checkpoint_step() < 10 || seen.steps_size() <= seen.checkpoint_step()) {
    auto next = pod.coordinator().WaitJob(job->id(), version, absl::Seconds(5));
    ASSERT_TRUE(next.ok());
    std::tie(seen, version) = *next;
    ASSERT_NE(seen.state(), v1::JOB_STATE_SUCCEEDED) << "the job ended before it could be cancelled";
  }
  ASSERT_TRUE(pod.coordinator().CancelJob(job->id()).ok());
  const v1::Job cancelled = pod.Wait(job->id());
  ASSERT_EQ(cancelled.state(), v1::JOB_STATE_CANCELLED);
  // Succeeded jobs cannot be resumed; unknown ones are not found.
  EXPECT_EQ(pod.coordinator().ResumeJob(whole.id()).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(pod.coordinator().ResumeJob("job-99").status().code(), absl::StatusCode::kNotFound);

  auto resumed = pod.coordinator().ResumeJob(job->id());
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->restarts(), 1);
  EXPECT_THAT(resumed->restart_reason(),
              ::testing::HasSubstr(absl::StrCat("from its checkpoint (steps 0-", cancelled.checkpoint_step() - 1,
                                                " done), at step ", cancelled.checkpoint_step())));
  const v1::Job done = pod.Wait(job->id());
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.error();
  ASSERT_EQ(done.steps_size(), whole.steps_size());
  for (int i = 0; i < done.steps_size(); ++i) {
    EXPECT_EQ(done.steps(i).step(), i);
    EXPECT_EQ(done.steps(i).loss(), whole.steps(i).loss()) << "step " << i;  // bit for bit
  }
  EXPECT_EQ(done.train_summary().param_l2(), whole.train_summary().param_l2());
  // Its trace has each step once, on one clock: the uninterrupted run's
  // (the steps run twice were there twice, the second time from 0 again).
  const auto spans = [&](const std::string& id) {
    auto trace = pod.Trace(id);
    EXPECT_TRUE(trace.ok()) << trace.status();
    std::vector<std::tuple<std::string, std::string, double, double>> out;
    for (const v1::TraceEvent& e : trace->events()) out.emplace_back(e.track(), e.name(), e.start_s(), e.end_s());
    std::sort(out.begin(), out.end());
    return std::make_pair(trace->extent().steps(), out);
  };
  const auto resumed_spans = spans(done.id()), whole_spans = spans(whole.id());
  EXPECT_EQ(resumed_spans.first, whole_spans.first);
  ASSERT_EQ(resumed_spans.second.size(), whole_spans.second.size());
  EXPECT_TRUE(resumed_spans.second == whole_spans.second);
  std::filesystem::remove_all(dir);
}

TEST(TrainClusterTest, TraceHasEveryChipAndLinkOnTheEmulatedClock) {
  TestPod pod({"v5p:2x4", 1, 4, "auto"}, 0);
  const v1::Job job = pod.Run(Job("ici_fsdp_parallelism: 2\nici_tensor_parallelism: 4\nfsdp_prefetch: true\n", 2));
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error();
  auto trace = pod.Trace(job.id());
  ASSERT_TRUE(trace.ok()) << trace.status();
  std::set<std::string> tracks;
  double step0_end = 0, step1_start = 1e9;
  bool matmul = false, collective = false, transfer = false;
  for (const v1::TraceEvent& e : trace->events()) {
    tracks.insert(e.track());
    EXPECT_GE(e.end_s(), e.start_s()) << e.name();
    if (e.name().rfind("step 0: ", 0) == 0) step0_end = std::max(step0_end, e.end_s());
    if (e.name().rfind("step 1: ", 0) == 0) step1_start = std::min(step1_start, e.start_s());
    matmul |= e.name().find("matmul") != std::string::npos;
    collective |= e.name().find("all-gather fsdp") != std::string::npos;
    transfer |= e.track().rfind("link", 0) == 0 && e.bytes() > 0;
  }
  for (int chip = 0; chip < 8; ++chip) EXPECT_TRUE(tracks.count("chip " + std::to_string(chip))) << chip;
  EXPECT_TRUE(matmul && collective && transfer);
  EXPECT_GE(step1_start, job.steps(0).emulated_step_s() - 1e-12);  // steps follow one another
  EXPECT_LE(step0_end, job.steps(0).emulated_step_s() + 1e-12);
  // An unknown job has none.
  auto none = pod.Trace("job-99");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
}


TEST(TrainClusterTest, PacedStepsFollowTheEmulatedClock) {
  TestPod pod({"v5p:2x4", 1, 4, "auto"}, 1e4);
  const v1::Job job = pod.Run(Job("ici_fsdp_parallelism: 2\nici_tensor_parallelism: 4\n", 2));
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error();
  for (const v1::TrainStep& s : job.steps()) {
    EXPECT_GE(s.wall_s(), 0.97 * s.emulated_step_s() * 1e4) << "step " << s.step();
    EXPECT_LE(s.wall_s(), 1.5 * s.emulated_step_s() * 1e4 + 0.05) << "host lag " << s.host_lag_s();
  }
}

}  // namespace
}  // namespace tpuemu
