// Results bigger than one gRPC message read back whole through the CLI's
// client (traces and job lists as streams of pieces, jobs up to the largest
// request), and the coordinator keeps within its retention: a job's trace
// and step records, all traces together, and finished jobs' records are
// capped, and what was dropped is said.
#include <string>

#include "client/coordinator_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/train/config.h"
#include "services/proto_conv.h"
#include "services/train_proto.h"
#include "tests/cluster/test_pod.h"

namespace tpuemu {
namespace {

using testing::HasSubstr;

// `padding`: the job's name, to make it as big as a job file may be.
TrainSpec Job(int layers, int steps, const std::string& padding = "") {
  auto spec = ParseTrainSpec("ici_fsdp_parallelism: 2\nici_tensor_parallelism: 4\nemb_dim: 32\nmlp_dim: 64\n"
                             "num_layers: " + std::to_string(layers) + "\nglobal_batch_tokens: 64\nseed: 5\nsteps: " +
                                 std::to_string(steps) + "\nopt_type: sgd\nlearning_rate: 20\n" +
                                 (padding.empty() ? "" : "name: " + padding + "\n"),
                             "test.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.value_or(TrainSpec{});
}

struct ClientTrace {
  v1::JobTrace whole;
  size_t bytes = 0;          // serialized, all pieces
  size_t biggest_piece = 0;  // serialized
};

absl::StatusOr<ClientTrace> ReadTrace(CoordinatorClient& client, const std::string& id) {
  ClientTrace out;
  absl::Status s = client.Trace(id, [&](const v1::JobTrace& piece) {
    out.bytes += piece.ByteSizeLong();
    out.biggest_piece = std::max(out.biggest_piece, piece.ByteSizeLong());
    out.whole.MergeFrom(piece);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return out;
}

TEST(JobResultsClusterTest, ATraceBiggerThanAnyMessageReadsBackWholeThroughTheClient) {
  TestPod pod({"v5p:2x4", 1, 4, "auto"}, 0);  // 8 chips: about 10,000 spans a step of 32 layers
  CoordinatorClient client(pod.ServeCoordinator(), TransportSecurity::Insecure());
  const v1::Job job = pod.Run(Job(32, 20));
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error();
  auto read = ReadTrace(client, job.id());
  ASSERT_TRUE(read.ok()) << read.status();
  // More than the server takes (8 MiB) and twice a client's default (4 MiB).
  EXPECT_GT(read->bytes, size_t{kMaxRequestBytes});
  EXPECT_LE(read->biggest_piece, kReplyPieceBytes);
  const v1::TraceExtent& kept = read->whole.extent();
  EXPECT_EQ(kept.steps(), 20);
  EXPECT_EQ(kept.first_kept_step(), 0);
  EXPECT_EQ(kept.last_kept_step(), 19);
  EXPECT_EQ(kept.spans_dropped(), 0u);
  EXPECT_EQ(static_cast<uint64_t>(read->whole.events_size()), kept.spans());
  // The same spans as the coordinator holds.
  auto direct = pod.Trace(job.id());
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_EQ(read->whole.SerializeAsString(), direct->SerializeAsString());
}

TEST(JobResultsClusterTest, JobListsBiggerThanAnyMessageReadBackWhole) {
  TestPod pod({"v5p:2x4", 1, 4, "auto"}, 0);
  CoordinatorClient client(pod.ServeCoordinator(), TransportSecurity::Insecure());
  // Jobs as big as a job file may make them (a name just under its 1 MiB
  // limit): eighteen of them make a list bigger than any reply the client
  // accepts in one message.
  constexpr int kJobs = 18;
  std::vector<std::string> ids;
  for (int i = 0; i < kJobs; ++i) {
    v1::SubmitJobRequest req;
    *req.mutable_train() = ToProto(Job(1, 1, std::string(kMaxJobFileBytes - 1024, 'x')));
    auto job = client.Submit(req);
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(pod.Wait(job->id()).state(), v1::JOB_STATE_SUCCEEDED);
    ids.push_back(job->id());
  }
  for (const std::string& id : ids) {
    auto job = client.Get(id);
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_GT(job->ByteSizeLong(), kMaxJobFileBytes - 1024);
    EXPECT_EQ(job->steps_size(), 1);
  }
  auto list = client.List();
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->jobs_size(), kJobs);
  for (int i = 0; i < kJobs; ++i) EXPECT_EQ(list->jobs(i).id(), ids[i]);
  EXPECT_GT(list->ByteSizeLong(), size_t{kMaxReplyBytes});
  EXPECT_EQ(list->finished_jobs_dropped(), 0u);
  EXPECT_EQ(list->finished_jobs_kept(), JobRetention().finished_jobs);
}

TEST(JobResultsClusterTest, TheCoordinatorKeepsWithinItsRetentionAndSaysWhatItDropped) {
  // Each step of Job(2, n) on this pod traces the same number of spans.
  int64_t spans_per_step = 0;
  {
    TestPod probe({"v5p:2x4", 1, 4, "auto"}, 0);
    const v1::Job job = probe.Run(Job(2, 1));
    auto trace = probe.Trace(job.id());
    ASSERT_TRUE(trace.ok()) << trace.status();
    spans_per_step = trace->events_size();
    ASSERT_GT(spans_per_step, 0);
  }
  JobRetention retention;
  retention.trace_spans_per_job = spans_per_step * 5 / 2;  // two and a half steps
  retention.trace_spans_total = retention.trace_spans_per_job;
  retention.step_records_per_job = 2;
  retention.finished_jobs = 2;
  TestPod pod({"v5p:2x4", 1, 4, "auto"}, 0, {.retention = retention});
  CoordinatorClient client(pod.ServeCoordinator(), TransportSecurity::Insecure());

  // A job's trace keeps its latest steps within the cap; its step records too.
  const v1::Job first = pod.Run(Job(2, 5));
  EXPECT_EQ(first.steps_dropped(), 3);
  ASSERT_EQ(first.steps_size(), 2);
  EXPECT_EQ(first.steps(0).step(), 3);
  auto trace = ReadTrace(client, first.id());
  ASSERT_TRUE(trace.ok()) << trace.status();
  const v1::TraceExtent& kept = trace->whole.extent();
  EXPECT_EQ(kept.steps(), 5);
  EXPECT_EQ(kept.first_kept_step(), 3);
  EXPECT_EQ(kept.last_kept_step(), 4);
  EXPECT_EQ(kept.spans(), static_cast<uint64_t>(2 * spans_per_step));
  EXPECT_EQ(kept.spans_dropped(), static_cast<uint64_t>(3 * spans_per_step));
  EXPECT_THAT(kept.dropped_why(), HasSubstr(std::to_string(retention.trace_spans_per_job) + " spans"));
  EXPECT_THAT(trace->whole.events(0).name(), testing::StartsWith("step 3: "));

  // The next job's trace takes the room of the first's (the pod-wide budget).
  const v1::Job second = pod.Run(Job(2, 1));
  auto first_again = ReadTrace(client, first.id());
  ASSERT_TRUE(first_again.ok()) << first_again.status();
  EXPECT_EQ(first_again->whole.events_size(), 0);
  EXPECT_EQ(first_again->whole.extent().spans_dropped(), static_cast<uint64_t>(5 * spans_per_step));
  EXPECT_THAT(first_again->whole.extent().dropped_why(), HasSubstr("newer jobs"));
  auto second_trace = ReadTrace(client, second.id());
  ASSERT_TRUE(second_trace.ok()) << second_trace.status();
  EXPECT_EQ(second_trace->whole.events_size(), spans_per_step);

  // A third finished job: the first's record goes, and the list says so.
  const v1::Job third = pod.Run(Job(2, 1));
  auto gone = client.Get(first.id());
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(gone.status().message()), HasSubstr("record was dropped"));
  auto list = client.List();
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->jobs_size(), 2);
  EXPECT_EQ(list->jobs(0).id(), second.id());
  EXPECT_EQ(list->jobs(1).id(), third.id());
  EXPECT_EQ(list->finished_jobs_dropped(), 1u);
  EXPECT_EQ(list->finished_jobs_kept(), 2);
}

}  // namespace
}  // namespace tpuemu
