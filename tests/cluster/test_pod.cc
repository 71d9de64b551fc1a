#include "tests/cluster/test_pod.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/proto_conv.h"

namespace tpuemu {

TestPod::TestPod(const TopologyRequest& topology, double time_scale, const JobRetention& retention) {
  // As tpuemu-worker's main does, so that these workers run with the same
  // malloc settings: WarmHeap, which keeps a fresh pod's first paced
  // collective from faulting in gRPC's receive buffers while timed, relies on
  // them.
  PrepareProcessForDataPath();
  CoordinatorOptions options;
  options.topology = topology;
  options.time_scale = time_scale;
  options.heartbeat_timeout = absl::Hours(1);  // no heartbeat threads here
  options.retention = retention;
  auto c = Coordinator::Create(options, MakeGrpcWorkerClient);
  EXPECT_TRUE(c.ok()) << c.status();
  coordinator_ = *std::move(c);
  const Topology& topo = coordinator_->topology();
  workers_.resize(topo.num_hosts());
  for (int host = 0; host < topo.num_hosts(); ++host) {
    Worker& w = workers_[host];
    w.node = std::make_unique<WorkerNode>(host);
    w.service = std::make_unique<WorkerServiceImpl>(w.node.get());
    WorkerNode* node = w.node.get();
    w.peer = std::make_unique<PeerServiceImpl>([node](Frame&& f) { node->DeliverPeerFrame(std::move(f)); });
    auto server = StartServer("127.0.0.1:0", {w.service.get(), w.peer.get()});
    EXPECT_TRUE(server.ok()) << server.status();
    w.server = *std::move(server);
    const int slice = topo.SliceOfHost(host);
    v1::RegisterWorkerRequest req;
    req.set_slice(slice);
    req.set_host(host - slice * topo.hosts_per_slice());
    req.set_address(absl::StrCat("127.0.0.1:", w.server.port));
    auto reg = coordinator_->RegisterWorker(req);
    EXPECT_TRUE(reg.ok()) << reg.status();
  }
  for (int i = 0; i < 200 && !coordinator_->ClusterStatus().ready(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_TRUE(coordinator_->ClusterStatus().ready());
}

TestPod::~TestPod() {
  if (coordinator_server_.server) coordinator_server_.server->Shutdown(std::chrono::system_clock::now());
  coordinator_.reset();
  for (Worker& w : workers_) {
    if (w.server.server) w.server.server->Shutdown(std::chrono::system_clock::now());
  }
}

std::string TestPod::ServeCoordinator() {
  coordinator_service_ = std::make_unique<CoordinatorServiceImpl>(coordinator_.get());
  auto server = StartServer("127.0.0.1:0", {coordinator_service_.get()});
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return "";
  coordinator_server_ = *std::move(server);
  return absl::StrCat("127.0.0.1:", coordinator_server_.port);
}

absl::StatusOr<v1::Job> TestPod::Submit(const CollectiveSpec& spec) {
  v1::SubmitJobRequest req;
  *req.mutable_collective() = ToProto(spec);
  return coordinator_->SubmitJob(req);
}

absl::StatusOr<v1::Job> TestPod::Submit(const MatmulSpec& spec) {
  v1::SubmitJobRequest req;
  *req.mutable_matmul() = ToProto(spec);
  return coordinator_->SubmitJob(req);
}

absl::StatusOr<v1::Job> TestPod::Submit(const TrainSpec& spec) {
  v1::SubmitJobRequest req;
  *req.mutable_train() = ToProto(spec);
  return coordinator_->SubmitJob(req);
}

v1::Job TestPod::Wait(const std::string& id) {
  int64_t version = -1;
  while (true) {
    auto next = coordinator_->WaitJob(id, version, absl::Seconds(1));
    EXPECT_TRUE(next.ok()) << next.status();
    if (!next.ok()) return {};
    version = next->second;
    if (IsTerminal(next->first.state())) return next->first;
  }
}

absl::StatusOr<v1::JobTrace> TestPod::Trace(const std::string& id) {
  auto reader = coordinator_->ReadJobTrace(id);
  if (!reader.ok()) return reader.status();
  v1::JobTrace whole, piece;
  while ((*reader)->Next(kReplyPieceBytes, &piece)) whole.MergeFrom(piece);
  return whole;
}

v1::Job TestPod::Run(const CollectiveSpec& spec) { return Finish(Submit(spec)); }
v1::Job TestPod::Run(const MatmulSpec& spec) { return Finish(Submit(spec)); }
v1::Job TestPod::Run(const TrainSpec& spec) { return Finish(Submit(spec)); }

v1::Job TestPod::Finish(const absl::StatusOr<v1::Job>& job) {
  EXPECT_TRUE(job.ok()) << job.status();
  if (!job.ok()) return {};
  v1::Job done = Wait(job->id());
  EXPECT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.error();
  return done;
}

}  // namespace tpuemu
