// The coordinator without gRPC: in-process workers (their nodes, called
// directly through the worker contract) whose chips talk over an in-memory
// fabric. No servers, no ports; jobs give the figures a gRPC pod gives, which
// the emulated clock fixes whatever carries the bytes (checked against the
// core's one-process pod).
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/coordinator.h"
#include "core/cluster/in_memory_fabric.h"
#include "core/job/inprocess_pod.h"
#include "gtest/gtest.h"
#include "services/proto_conv.h"
#include "worker/worker_node.h"

namespace tpuemu {
namespace {

class InProcessCoordinatorTest : public ::testing::Test {
 protected:
  // Two workers of four chips: the x ring crosses them.
  void SetUp() override {
    CoordinatorOptions options;
    options.topology = {"v5p:2x4", 1, 4, "auto"};
    options.heartbeat_timeout = absl::InfiniteDuration();
    auto topo = Topology::Create(options.topology);
    ASSERT_TRUE(topo.ok()) << topo.status();
    for (int host = 0; host < topo->num_hosts(); ++host) {
      nodes_.push_back(std::make_unique<WorkerNode>(host, fabric_.Factory()));
    }
    // A worker's address names its node; the coordinator holds it, not owns it.
    auto c = Coordinator::Create(options, [this](const std::string& address) {
      return std::shared_ptr<WorkerInterface>(nodes_[std::stoi(address)].get(), [](WorkerInterface*) {});
    });
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = *std::move(c);
    for (int host = 0; host < topo->num_hosts(); ++host) {
      v1::RegisterWorkerRequest req;
      req.set_slice(0);
      req.set_host(host);
      req.set_address(std::to_string(host));
      auto granted = coordinator_->RegisterWorker(req);
      ASSERT_TRUE(granted.ok()) << granted.status();
      nodes_[host]->set_registration(granted->global_host(), granted->incarnation());
    }
    for (int i = 0; i < 200 && !coordinator_->ClusterStatus().ready(); ++i) absl::SleepFor(absl::Milliseconds(25));
    ASSERT_TRUE(coordinator_->ClusterStatus().ready());
    reference_ = std::make_unique<InProcessPod>(*topo, 0);
  }

  v1::Job Run(const v1::SubmitJobRequest& request) {
    auto submitted = coordinator_->SubmitJob(request);
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    if (!submitted.ok()) return {};
    for (int64_t version = -1;;) {
      auto next = coordinator_->WaitJob(submitted->id(), version, absl::Seconds(1));
      EXPECT_TRUE(next.ok()) << next.status();
      if (!next.ok()) return {};
      version = next->second;
      if (IsTerminal(next->first.state())) return next->first;
    }
  }

  InMemoryFabric fabric_;  // outlives the nodes' ends
  std::vector<std::unique_ptr<WorkerNode>> nodes_;
  std::unique_ptr<Coordinator> coordinator_;  // goes before the nodes it calls
  std::unique_ptr<InProcessPod> reference_;
};

TEST_F(InProcessCoordinatorTest, ACollectiveSucceedsWithTheFiguresOfOnePod) {
  CollectiveSpec spec;
  spec.op = CollectiveOp::kAllReduce;
  spec.axes = {Axis::kX};
  spec.bytes = 1 << 20;
  v1::SubmitJobRequest request;
  *request.mutable_collective() = ToProto(spec);
  const v1::Job job = Run(request);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error();
  auto expected = reference_->Run(spec);
  ASSERT_TRUE(expected.ok()) << expected.status();
  EXPECT_TRUE(job.result().correct());
  EXPECT_EQ(job.result().n(), expected->n);
  EXPECT_DOUBLE_EQ(job.result().emulated_s(), expected->emulated_s);
  EXPECT_DOUBLE_EQ(job.result().predicted_s(), expected->predicted_s);
}

TEST_F(InProcessCoordinatorTest, AMatmulSucceedsWithTheFiguresOfOnePod) {
  MatmulSpec spec;
  spec.expr = "A[I_X, J_Y] * B[J_X, K_Y] -> C[I_X, K_Y]";
  spec.dims = "I=256,J=512,K=128";
  spec.values = ValueKind::kSmallInt;
  spec.chunk_bytes = 64 << 10;
  v1::SubmitJobRequest request;
  *request.mutable_matmul() = ToProto(spec);
  const v1::Job job = Run(request);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error();
  auto expected = reference_->RunMatmul(spec);
  ASSERT_TRUE(expected.ok()) << expected.status();
  const v1::MatmulResult& r = job.matmul_result();
  EXPECT_TRUE(r.correct());
  EXPECT_EQ(r.max_rel_err(), 0.0);
  EXPECT_EQ(r.flops_per_chip(), 2ull * 256 * 512 * 128 / 8);
  EXPECT_EQ(r.comm_bytes_total(), expected->comm_bytes_total);
  EXPECT_DOUBLE_EQ(r.emulated_s(), expected->emulated_s);
  EXPECT_DOUBLE_EQ(r.predicted_s(), expected->predicted_s);
}

}  // namespace
}  // namespace tpuemu
