// The transport-neutral suite: every case is written once and runs on the
// in-process pod (workers called through the worker contract, chips talking
// through memory) and on the gRPC pod (real servers on loopback). What a job
// computes and what the emulated clock says must not depend on what carries
// the bytes: each case checks exact results and the one-process pod's (or the
// one-device reference's) figures on both.
#include <cmath>
#include <string>

#include "core/collective/report.h"
#include "core/job/inprocess_pod.h"
#include "core/matmul/report.h"
#include "core/train/job.h"
#include "core/train/model.h"
#include "gtest/gtest.h"
#include "services/proto_conv.h"
#include "services/train_proto.h"
#include "tests/cluster/pod_transport.h"

namespace tpuemu {
namespace {

// Two workers of four chips: the x ring crosses them.
const TopologyRequest kPod = {"v5p:2x4", 1, 4, "auto"};

class TransportSuite : public ::testing::TestWithParam<Transport> {
 protected:
  void SetUp() override {
    pod_ = MakePod(GetParam(), kPod);
    auto topo = Topology::Create(kPod);
    ASSERT_TRUE(topo.ok()) << topo.status();
    reference_ = std::make_unique<InProcessPod>(*topo, 0);
  }
  std::unique_ptr<PodTransport> pod_;
  std::unique_ptr<InProcessPod> reference_;  // the core's one-process pod
};

TEST_P(TransportSuite, EveryCollectiveSucceedsWithTheFiguresOfOnePod) {
  for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter, CollectiveOp::kAllReduce,
                          CollectiveOp::kAllToAll}) {
    CollectiveSpec spec;
    spec.op = op;
    spec.axes = {Axis::kX, Axis::kY};
    spec.bytes = 1 << 20;
    v1::SubmitJobRequest request;
    *request.mutable_collective() = ToProto(spec);
    const v1::Job job = pod_->Run(request);
    ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << OpName(op) << ": " << job.error();
    auto expected = RunReport<CollectiveReport>(*reference_, spec);
    ASSERT_TRUE(expected.ok()) << expected.status();
    EXPECT_TRUE(job.result().correct()) << OpName(op);
    EXPECT_EQ(job.result().n(), expected->n);
    EXPECT_DOUBLE_EQ(job.result().emulated_s(), expected->emulated_s) << OpName(op);
    EXPECT_DOUBLE_EQ(job.result().predicted_s(), expected->predicted_s) << OpName(op);
  }
}

TEST_P(TransportSuite, AMatmulEqualsOneDeviceWithTheFiguresOfOnePod) {
  MatmulSpec spec;
  spec.expr = "A[I_X, J_Y] * B[J_X, K_Y] -> C[I_X, K_Y]";
  spec.dims = "I=256,J=512,K=128";
  spec.values = ValueKind::kSmallInt;
  spec.chunk_bytes = 64 << 10;
  v1::SubmitJobRequest request;
  *request.mutable_matmul() = ToProto(spec);
  const v1::Job job = pod_->Run(request);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error();
  auto expected = RunReport<MatmulReport>(*reference_, spec);
  ASSERT_TRUE(expected.ok()) << expected.status();
  const v1::MatmulResult& r = job.matmul_result();
  EXPECT_TRUE(r.correct());
  EXPECT_EQ(r.max_rel_err(), 0.0);
  EXPECT_EQ(r.flops_per_chip(), 2ull * 256 * 512 * 128 / 8);
  EXPECT_EQ(r.comm_bytes_total(), expected->comm_bytes_total);
  EXPECT_DOUBLE_EQ(r.emulated_s(), expected->emulated_s);
  EXPECT_DOUBLE_EQ(r.predicted_s(), expected->predicted_s);
}

TEST_P(TransportSuite, TrainingEqualsOneDeviceForEveryStrategy) {
  for (const std::string mesh : {"ici_data_parallelism: -1\nici_fsdp_parallelism: 1\n",      // DP
                                 "ici_fsdp_parallelism: -1\n",                                // FSDP
                                 "ici_fsdp_parallelism: 2\nici_tensor_parallelism: 4\n"}) {  // FSDP + TP
    auto spec = ParseTrainSpec(mesh + "emb_dim: 32\nmlp_dim: 64\nnum_layers: 2\nglobal_batch_tokens: 64\nseed: 5\n"
                                      "steps: 2\nopt_type: adam\nlearning_rate: 0.01\n",
                               "suite.yaml");
    ASSERT_TRUE(spec.ok()) << spec.status();
    v1::SubmitJobRequest request;
    *request.mutable_train() = ToProto(*spec);
    const v1::Job job = pod_->Run(request);
    ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << mesh << job.error();
    const TrainConfig* config = &spec->config;
    ReferenceTrainer reference(*config);
    ASSERT_EQ(job.steps_size(), config->steps);
    for (const v1::TrainStep& step : job.steps()) {
      const double want = reference.Step().loss;
      EXPECT_NEAR(step.loss(), want, 1e-5 * want) << mesh << "step " << step.step();
      EXPECT_GT(step.emulated_step_s(), 0);
    }
    const double l2 = std::sqrt(SumOfSquares(reference.weights()));
    EXPECT_NEAR(job.train_summary().param_l2(), l2, 1e-5 * l2) << mesh;
  }
}

TEST_P(TransportSuite, ABadSpecIsRefusedAtSubmitNamingTheField) {
  CollectiveSpec spec;
  spec.op = CollectiveOp::kAllGather;
  spec.axes = {Axis::kZ};  // the pod is 2-D
  spec.bytes = 1 << 20;
  v1::SubmitJobRequest request;
  *request.mutable_collective() = ToProto(spec);
  auto submitted = pod_->coordinator().SubmitJob(request);
  ASSERT_FALSE(submitted.ok());
  EXPECT_EQ(submitted.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(submitted.status().message().find("axes"), std::string::npos) << submitted.status();
  EXPECT_NE(submitted.status().message().find("has no axis z"), std::string::npos) << submitted.status();
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportSuite, ::testing::Values(Transport::kInProcess, Transport::kGrpc),
                         [](const ::testing::TestParamInfo<Transport>& info) { return TransportName(info.param); });

}  // namespace
}  // namespace tpuemu
