// What a careless or hostile client may send a pod: a collective the hosts
// cannot hold, aborts of job numbers not yet used, peer frames for jobs that
// do not exist or with lengths that lie, and calls that run out of memory.
// Each is refused or contained; no worker dies and no stream hangs.
#include <chrono>
#include <new>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/sync_stream.h"
#include "gtest/gtest.h"
#include "services/frame_codec.h"
#include "core/host/job.h"
#include "core/wire/run_number.h"
#include "services/worker_client.h"
#include "tests/cluster/test_pod.h"
#include "tests/cluster/train_jobs.h"
#include "tpuemu/v1/services.grpc.pb.h"

namespace tpuemu {
namespace {

using ::testing::HasSubstr;

CollectiveSpec AllGatherX(uint64_t bytes) {
  CollectiveSpec s;
  s.op = CollectiveOp::kAllGather;
  s.axes = {Axis::kX};
  s.bytes = bytes;
  return s;
}

// The issue's pod: v5p 2x4, two chips per worker, four workers.
TopologyRequest IssuePod() { return {"v5p:2x4", 1, 2, "auto"}; }

std::string WorkerAddress(TestPod& pod, int i) { return pod.coordinator().ClusterStatus().workers(i).address(); }

v1::WorkerStatus WorkerStatus(const std::string& address) {
  auto stub = v1::WorkerService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::WorkerStatus status;
  EXPECT_TRUE(stub->GetStatus(&ctx, v1::WorkerStatusRequest(), &status).ok());
  return status;
}

// A PeerService stream opened by hand, as any client could.
struct RawPeerStream {
  explicit RawPeerStream(const std::string& address)
      : channel(grpc::CreateChannel(address, grpc::InsecureChannelCredentials())) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    grpc::internal::RpcMethod method("/tpuemu.v1.PeerService/Stream", grpc::internal::RpcMethod::CLIENT_STREAMING,
                                     channel);
    writer.reset(grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(channel.get(), method, &ctx,
                                                                                &response));
  }
  grpc::Status Finish() {
    writer->WritesDone();
    return writer->Finish();
  }
  std::shared_ptr<grpc::Channel> channel;
  grpc::ClientContext ctx;
  grpc::ByteBuffer response;
  std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer;
};

TEST(WorkerHardeningTest, ACollectiveTheHostsCannotHoldIsRefusedAtSubmitWithTheFigureAndTheLimit) {
  TestPod pod(IssuePod(), 0);
  auto job = pod.Submit(AllGatherX(uint64_t{1024} << 30));
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(job.status().message());
  EXPECT_THAT(message, HasSubstr("`bytes` 1024GiB (all-gather over x)"));
  // Every one of the 8 chips keeps the 2^39-element array in fp32, twice.
  EXPECT_THAT(message, HasSubstr("the pod's 8 chips would hold about 33554432 MiB of host memory (limit 12288 MiB)"));
  // A worker asked directly refuses too, before allocating anything.
  auto client = MakeGrpcWorkerClient(WorkerAddress(pod, 0));
  Cancellation calls;
  const absl::Status prepared = client->PrepareJob(pod.incarnation(0), 77, AllGatherX(uint64_t{1024} << 30), {}, calls);
  EXPECT_EQ(prepared.code(), absl::StatusCode::kInvalidArgument) << prepared;
  // The pod still runs jobs.
  EXPECT_TRUE(pod.Run(AllGatherX(1 << 20)).result().correct());
}

// A worker whose every job call runs out of memory.
class OutOfMemoryWorker : public WorkerInterface {
 public:
  absl::Status Configure(uint64_t, const PodConfig&) override { throw std::bad_alloc(); }
  absl::Status PrepareJob(uint64_t, uint64_t, const JobSpec&, const Placement&, Cancellation&) override {
    throw std::bad_alloc();
  }
  absl::StatusOr<std::vector<ChipRunResult>> RunJob(uint64_t, uint64_t, int, const Faults&, Cancellation&) override {
    throw std::bad_alloc();
  }
  absl::StatusOr<HostCheck> CheckJob(uint64_t, uint64_t, Cancellation&) override {
    throw std::bad_alloc();
  }
  absl::Status Abort(uint64_t, uint64_t, const std::string&, absl::Duration) override { return absl::OkStatus(); }
  absl::StatusOr<WorkerStatusView> Status(absl::Duration) override { return WorkerStatusView{}; }
};

TEST(WorkerHardeningTest, AnAllocationThatFailsFailsTheCallWithResourceExhaustedNotTheWorker) {
  OutOfMemoryWorker worker;
  WorkerServiceImpl service(&worker);
  PeerServiceImpl peer([](Frame&&) { throw std::bad_alloc(); });
  auto server = StartServer("127.0.0.1:0", {&service}, ServerPeers::kMembersOnly, &peer);
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = absl::StrCat("127.0.0.1:", server->port);
  auto client = MakeGrpcWorkerClient(address);
  Cancellation calls;
  const uint64_t run = RunNumber(3, 0, /*epoch=*/77);
  const absl::Status prepared = client->PrepareJob(0, run, AllGatherX(1 << 20), {}, calls);
  EXPECT_EQ(prepared.code(), absl::StatusCode::kResourceExhausted) << prepared;
  EXPECT_THAT(std::string(prepared.message()), HasSubstr("ran out of host memory in PrepareJob of job-3"));
  EXPECT_EQ(client->RunJob(0, run, 0, {}, calls).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(client->CheckJob(0, run, calls).status().code(), absl::StatusCode::kResourceExhausted);
  // A peer stream whose frame cannot be stored ends with a status, at once.
  RawPeerStream stream(address);
  Frame frame;
  frame.header.job = 3;
  frame.payload.assign(16, 1.0f);
  stream.writer->Write(EncodeFrame(std::move(frame)));
  const grpc::Status finished = stream.Finish();
  EXPECT_EQ(finished.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << finished.error_message();
  // Still serving.
  EXPECT_TRUE(client->Status(absl::Seconds(10)).ok());
  server->server->Shutdown(std::chrono::system_clock::now());
}

TEST(WorkerHardeningTest, AnAbortOfJobNumbersNotYetUsedLeavesThoseJobsAlone) {
  TestPod pod(IssuePod(), 0);
  for (int i = 0; i < pod.num_workers(); ++i) {
    auto client = MakeGrpcWorkerClient(WorkerAddress(pod, i));
    for (uint64_t job = 1; job <= 5; ++job) {
      ASSERT_TRUE(client->Abort(pod.incarnation(i), job, "a stray abort", absl::Seconds(5)).ok());
    }
  }
  for (int n = 0; n < 3; ++n) {
    v1::Job job = pod.Run(AllGatherX(1 << 20));
    EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.id() << ": " << job.error();
  }
}

// A user's cancel (or another host's failure) reaches the workers while they
// are still preparing the job: each must drop what it made, not keep it
// prepared for a RunJob that never comes, holding its memory.
TEST(WorkerHardeningTest, AJobCancelledWhileItsWorkersPrepareItLeavesNothingOnThem) {
  TestPod pod(IssuePod(), 0);
  // Big enough to take a while to prepare: weights, Adam's moments, the teacher's targets.
  auto job = pod.Submit(Parsed("ici_fsdp_parallelism: -1\nemb_dim: 1024\nmlp_dim: 4096\nnum_layers: 4\n"
                               "global_batch_tokens: 4096\nseed: 5\nsteps: 3\nopt_type: adam\nlearning_rate: 0.01\n",
                               "big.yaml"));
  ASSERT_TRUE(job.ok()) << job.status();
  for (const absl::Time deadline = absl::Now() + absl::Seconds(30); absl::Now() < deadline;) {
    auto now = pod.coordinator().GetJob(job->id());
    ASSERT_TRUE(now.ok()) << now.status();
    if (now->state() != v1::JOB_STATE_PENDING) break;
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(pod.coordinator().CancelJob(job->id()).ok());
  const v1::Job ended = pod.Wait(job->id());
  EXPECT_EQ(ended.state(), v1::JOB_STATE_CANCELLED) << ended.error();
  ASSERT_EQ(ended.steps_size(), 0) << "cancelled too late to test anything: preparing was faster than the cancel";
  // Every worker's preparing ends, and what it made goes with it.
  for (const absl::Time deadline = absl::Now() + absl::Seconds(60); absl::Now() < deadline && LiveHostJobs() > 0;) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(LiveHostJobs(), 0) << "a worker kept the cancelled job prepared";
  const v1::Job next = pod.Run(AllGatherX(1 << 20));
  EXPECT_EQ(next.state(), v1::JOB_STATE_SUCCEEDED) << next.error();
}

// A coordinator restarted without its job store numbers jobs from 1 again.
// Workers that registered with it again must not hold an old run's abort
// against the new run of the same number: here job-1 is cancelled, the
// workers register again, and a new job-1 runs through every worker's calls.
TEST(WorkerHardeningTest, AWorkerRegisteredAgainForgetsTheRunsOfBefore) {
  TestPod pod(IssuePod(), 0);
  auto cancelled = pod.Submit(Job("ici_fsdp_parallelism: -1\n", 100000));
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  pod.WaitForSteps(cancelled->id(), 1);
  ASSERT_TRUE(pod.coordinator().CancelJob(cancelled->id()).ok());
  ASSERT_EQ(pod.Wait(cancelled->id()).state(), v1::JOB_STATE_CANCELLED);
  // Its chips done on every worker: a new coordinator needs longer than that
  // to number a job (frames of the old run still on the wire would count as
  // the new one's, whose number they carry).
  for (const absl::Time deadline = absl::Now() + absl::Seconds(60); absl::Now() < deadline && LiveHostJobs() > 0;) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  const uint64_t run = RunNumber(1, 0);
  ASSERT_EQ(cancelled->id(), RunName(run));
  std::vector<uint64_t> incarnations;
  for (int i = 0; i < pod.num_workers(); ++i) {
    incarnations.push_back(pod.incarnation(i) + 1000);
    pod.node(i).set_registration(i, incarnations.back());
  }
  const JobSpec spec = AllGatherX(1 << 20);
  for (int i = 0; i < pod.num_workers(); ++i) {
    Cancellation cancel;
    const absl::Status prepared = pod.node(i).PrepareJob(incarnations[i], run, spec, Placement{}, cancel);
    ASSERT_TRUE(prepared.ok()) << "worker " << i << ": " << prepared;
  }
  std::vector<absl::Status> ran(pod.num_workers());
  std::vector<std::thread> chips;
  for (int i = 0; i < pod.num_workers(); ++i) {
    chips.emplace_back([&, i] {
      Cancellation cancel;
      ran[i] = pod.node(i).RunJob(incarnations[i], run, 0, Faults{}, cancel).status();
    });
  }
  for (std::thread& t : chips) t.join();
  for (int i = 0; i < pod.num_workers(); ++i) {
    EXPECT_TRUE(ran[i].ok()) << "worker " << i << ": " << ran[i];
    Cancellation cancel;
    EXPECT_TRUE(pod.node(i).CheckJob(incarnations[i], run, cancel).ok()) << "worker " << i;
  }
}

TEST(WorkerHardeningTest, PeerFramesOfAJobThatDoesNotExistAreDroppedAndCounted) {
  TestPod pod(IssuePod(), 0);
  const std::string address = WorkerAddress(pod, 1);
  RawPeerStream stream(address);
  for (int i = 0; i < 30; ++i) {
    Frame frame;
    frame.header = {4242, 0, 2, static_cast<uint64_t>(i), 0, 0, 0, 0};
    frame.payload.resize((4 << 20) / sizeof(float));
    ASSERT_TRUE(stream.writer->Write(EncodeFrame(std::move(frame))));
  }
  const grpc::Status finished = stream.Finish();
  EXPECT_TRUE(finished.ok()) << finished.error_message();
  const v1::WorkerStatus status = WorkerStatus(address);
  EXPECT_EQ(status.frames_waiting(), 0u) << "frames of a job that does not exist must not be held";
  EXPECT_EQ(status.frames_dropped(), 30u);
  EXPECT_TRUE(pod.Run(AllGatherX(1 << 20)).result().correct());
}

TEST(WorkerHardeningTest, AFrameWhoseHeaderDeclaresATerabyteFailsItsStreamAtOnce) {
  TestPod pod(IssuePod(), 0);
  RawPeerStream stream(WorkerAddress(pod, 1));
  // Field 1 (the header), length 2^40 as a varint, then a few bytes.
  const std::string wire = std::string("\x0a\x80\x80\x80\x80\x80\x20", 7) + "garbage";
  grpc::Slice slice(wire.data(), wire.size());
  const auto start = std::chrono::steady_clock::now();
  stream.writer->Write(grpc::ByteBuffer(&slice, 1));
  const grpc::Status finished = stream.Finish();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << "the stream must not hang";
  EXPECT_EQ(finished.error_code(), grpc::StatusCode::DATA_LOSS) << finished.error_message();
  EXPECT_THAT(finished.error_message(), HasSubstr("declares 1099511627776 bytes"));
  EXPECT_TRUE(pod.Run(AllGatherX(1 << 20)).result().correct());
}

}  // namespace
}  // namespace tpuemu
