#include "tests/cluster/pod_transport.h"

#include <vector>

#include "core/cluster/in_memory_fabric.h"
#include "gtest/gtest.h"
#include "tests/cluster/test_pod.h"
#include "worker/worker_node.h"

namespace tpuemu {
namespace {

class InProcessPodTransport : public PodTransport {
 public:
  explicit InProcessPodTransport(const TopologyRequest& topology) {
    CoordinatorOptions options;
    options.topology = topology;
    options.heartbeat_timeout = absl::InfiniteDuration();
    auto topo = Topology::Create(options.topology);
    EXPECT_TRUE(topo.ok()) << topo.status();
    if (!topo.ok()) return;
    for (int host = 0; host < topo->num_hosts(); ++host) {
      nodes_.push_back(std::make_unique<WorkerNode>(host, fabric_.Factory()));
    }
    // A worker's address names its node; the coordinator holds it, not owns it.
    auto c = Coordinator::Create(options, [this](const std::string& address) {
      return std::shared_ptr<WorkerInterface>(nodes_[std::stoi(address)].get(), [](WorkerInterface*) {});
    });
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return;
    coordinator_ = *std::move(c);
    for (int host = 0; host < topo->num_hosts(); ++host) {
      v1::RegisterWorkerRequest req;
      req.set_slice(host / topo->hosts_per_slice());
      req.set_host(host % topo->hosts_per_slice());
      req.set_address(std::to_string(host));
      auto granted = coordinator_->RegisterWorker(req);
      EXPECT_TRUE(granted.ok()) << granted.status();
      if (granted.ok()) nodes_[host]->set_registration(granted->global_host(), granted->incarnation());
    }
    for (int i = 0; i < 400 && !coordinator_->ClusterStatus().ready(); ++i) absl::SleepFor(absl::Milliseconds(25));
    EXPECT_TRUE(coordinator_->ClusterStatus().ready());
  }
  Coordinator& coordinator() override { return *coordinator_; }

 private:
  InMemoryFabric fabric_;  // outlives the nodes' ends
  std::vector<std::unique_ptr<WorkerNode>> nodes_;
  std::unique_ptr<Coordinator> coordinator_;  // goes before the nodes it calls
};

class GrpcPodTransport : public PodTransport {
 public:
  explicit GrpcPodTransport(const TopologyRequest& topology) : pod_(topology, 0) {}
  Coordinator& coordinator() override { return pod_.coordinator(); }

 private:
  TestPod pod_;
};

}  // namespace

v1::Job PodTransport::Run(const v1::SubmitJobRequest& request) {
  auto submitted = coordinator().SubmitJob(request);
  EXPECT_TRUE(submitted.ok()) << submitted.status();
  if (!submitted.ok()) return {};
  for (int64_t version = -1;;) {
    auto next = coordinator().WaitJob(submitted->id(), version, absl::Seconds(1));
    EXPECT_TRUE(next.ok()) << next.status();
    if (!next.ok()) return {};
    version = next->second;
    if (IsTerminal(next->first.state())) return next->first;
  }
}

std::string TransportName(Transport transport) { return transport == Transport::kGrpc ? "grpc" : "in_process"; }

std::unique_ptr<PodTransport> MakePod(Transport transport, const TopologyRequest& topology) {
  if (transport == Transport::kGrpc) return std::make_unique<GrpcPodTransport>(topology);
  return std::make_unique<InProcessPodTransport>(topology);
}

}  // namespace tpuemu
