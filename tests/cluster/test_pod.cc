#include "tests/cluster/test_pod.h"

#include <limits>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/grpc_fabric.h"
#include "services/proto_conv.h"
#include "services/train_proto.h"
#include "services/worker_client.h"

namespace tpuemu {

TestPod::TestPod(const TopologyRequest& topology, double time_scale, const TestPodOptions& pod_options) {
  // As tpuemu-worker's main does, so that these workers run with the same
  // malloc settings: WarmHeap, which keeps a fresh pod's first paced
  // collective from faulting in gRPC's receive buffers while timed, relies on
  // them.
  PrepareProcessForDataPath();
  CoordinatorOptions options;
  options.topology = topology;
  options.time_scale = time_scale;
  options.heartbeat_timeout = pod_options.heartbeat_timeout;
  options.retention = pod_options.retention;
  options.dcn_oversubscription = pod_options.dcn_oversubscription;
  auto c = Coordinator::Create(options, MakeGrpcWorkerClient);
  EXPECT_TRUE(c.ok()) << c.status();
  coordinator_ = *std::move(c);
  const Topology& topo = coordinator_->topology();
  workers_.resize(topo.num_hosts());
  for (int host = 0; host < topo.num_hosts(); ++host) {
    Worker& w = workers_[host];
    // The peer service first: the node's fabric uses its queue.
    w.peer = std::make_unique<PeerServiceImpl>([node = &w.node](Frame&& f) { (*node)->DeliverPeerFrame(std::move(f)); });
    w.node = std::make_unique<WorkerNode>(host, GrpcFabricFactory(*w.peer));
    w.node->AwaitRegistration();
    w.stoppable = std::make_unique<StoppableWorker>(w.node.get());
    w.service = std::make_unique<WorkerServiceImpl>(w.stoppable.get());
    auto server = StartServer("127.0.0.1:0", {w.service.get()}, ServerPeers::kMembersOnly, w.peer.get());
    EXPECT_TRUE(server.ok()) << server.status();
    w.server = *std::move(server);
    const int slice = topo.SliceOfHost(host);
    v1::RegisterWorkerRequest req;
    req.set_slice(slice);
    req.set_host(host - slice * topo.hosts_per_slice());
    req.set_address(absl::StrCat("127.0.0.1:", w.server.port));
    auto reg = coordinator_->RegisterWorker(req);
    EXPECT_TRUE(reg.ok()) << reg.status();
    if (!reg.ok()) continue;
    w.incarnation = reg->incarnation();
    w.node->set_registration(host, w.incarnation);
  }
  if (pod_options.heartbeat_timeout != absl::InfiniteDuration()) {
    heartbeats_ = std::thread([this, every = pod_options.heartbeat_timeout / 10] { HeartbeatLoop(every); });
  }
  for (int i = 0; i < 200 && !coordinator_->ClusterStatus().ready(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_TRUE(coordinator_->ClusterStatus().ready());
}

TestPod::~TestPod() {
  if (coordinator_server_.server) coordinator_server_.server->Shutdown(std::chrono::system_clock::now());
  {
    std::lock_guard<std::mutex> lock(heartbeat_mu_);
    stop_heartbeats_ = true;
  }
  heartbeat_cv_.notify_all();
  if (heartbeats_.joinable()) heartbeats_.join();
  for (Worker& w : workers_) w.stoppable->SetStopped(false);
  coordinator_.reset();
  for (Worker& w : workers_) {
    if (w.server.server) w.server.server->Shutdown(std::chrono::system_clock::now());
  }
}

std::string TestPod::ServeCoordinator() {
  coordinator_service_ = std::make_unique<CoordinatorServiceImpl>(coordinator_.get());
  auto server = StartServer("127.0.0.1:0", {coordinator_service_.get()}, ServerPeers::kMembersAndClients);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return "";
  coordinator_server_ = *std::move(server);
  return absl::StrCat("127.0.0.1:", coordinator_server_.port);
}

std::string TestPod::address(int host) const { return absl::StrCat("127.0.0.1:", workers_[host].server.port); }

void TestPod::Stop(int host) { workers_[host].stoppable->SetStopped(true); }
void TestPod::MuteHeartbeats(int host) {
  std::lock_guard<std::mutex> lock(heartbeat_mu_);
  workers_[host].muted = true;
}

void TestPod::Kill(int host) {
  MuteHeartbeats(host);
  workers_[host].server.server->Shutdown(std::chrono::system_clock::now());
}
void TestPod::Resume(int host) { workers_[host].stoppable->SetStopped(false); }

void TestPod::HeartbeatLoop(absl::Duration every) {
  std::unique_lock<std::mutex> lock(heartbeat_mu_);
  while (!heartbeat_cv_.wait_for(lock, absl::ToChronoNanoseconds(every), [&] { return stop_heartbeats_; })) {
    for (int host = 0; host < num_workers(); ++host) {
      if (!workers_[host].stoppable->stopped() && !workers_[host].muted) coordinator_->Heartbeat(host, workers_[host].incarnation, 0).IgnoreError();
    }
  }
}

void TestPod::StoppableWorker::SetStopped(bool stopped) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = stopped;
  }
  resumed_.notify_all();
}

bool TestPod::StoppableWorker::stopped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopped_;
}

void TestPod::StoppableWorker::WaitWhileStopped() const {
  std::unique_lock<std::mutex> lock(mu_);
  resumed_.wait(lock, [&] { return !stopped_; });
}

absl::Status TestPod::StoppableWorker::Configure(uint64_t incarnation, const PodConfig& config) {
  WaitWhileStopped();
  return worker_->Configure(incarnation, config);
}

absl::Status TestPod::StoppableWorker::PrepareJob(uint64_t incarnation, uint64_t job, const JobSpec& spec,
                                                  const Placement& placement, Cancellation& cancel) {
  WaitWhileStopped();
  return worker_->PrepareJob(incarnation, job, spec, placement, cancel);
}

absl::StatusOr<std::vector<ChipRunResult>> TestPod::StoppableWorker::RunJob(uint64_t incarnation, uint64_t job,
                                                                            int step, const Faults& added,
                                                                            Cancellation& cancel) {
  WaitWhileStopped();
  return worker_->RunJob(incarnation, job, step, added, cancel);
}

absl::StatusOr<HostCheck> TestPod::StoppableWorker::CheckJob(uint64_t incarnation, uint64_t job,
                                                                         Cancellation& cancel) {
  WaitWhileStopped();
  return worker_->CheckJob(incarnation, job, cancel);
}

absl::Status TestPod::StoppableWorker::Abort(uint64_t incarnation, uint64_t job, const std::string& reason,
                                             absl::Duration timeout) {
  WaitWhileStopped();
  return worker_->Abort(incarnation, job, reason, timeout);
}

absl::StatusOr<WorkerStatusView> TestPod::StoppableWorker::Status(absl::Duration timeout) {
  WaitWhileStopped();
  return worker_->Status(timeout);
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

absl::StatusOr<v1::Job> TestPod::Submit(const TrainSpec& spec, int priority) {
  v1::SubmitJobRequest req;
  *req.mutable_train() = ToProto(spec);
  req.set_priority(priority);
  return coordinator_->SubmitJob(req);
}

v1::Job TestPod::Wait(const std::string& id) { return WaitForSteps(id, std::numeric_limits<int>::max()); }

v1::Job TestPod::WaitForSteps(const std::string& id, int steps) {
  int64_t version = -1;
  while (true) {
    auto next = coordinator_->WaitJob(id, version, absl::Seconds(1));
    EXPECT_TRUE(next.ok()) << next.status();
    if (!next.ok()) return {};
    version = next->second;
    if (next->first.steps_size() >= steps || IsTerminal(next->first.state())) return next->first;
  }
}

absl::StatusOr<v1::JobTrace> TestPod::Trace(const std::string& id) {
  auto reader = coordinator_->ReadJobTrace(id, 0);
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
