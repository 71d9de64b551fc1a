// Sharded matmuls as jobs on a pod over real gRPC: workers plan their chips'
// share from the spec, move blocks between processes' worth of servers, and
// the coordinator gathers the check against one device.
#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cluster/test_pod.h"

namespace tpuemu {
namespace {

MatmulSpec Spec(const std::string& expr, const std::string& dims, const std::string& mesh = "") {
  MatmulSpec spec;
  spec.expr = expr;
  spec.dims = dims;
  spec.mesh = mesh;
  spec.values = ValueKind::kSmallInt;  // exact: the result must equal one device's bit for bit
  spec.chunk_bytes = 64 << 10;
  return spec;
}

void ExpectExact(const v1::Job& job, uint64_t flops_per_chip) {
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.error();
  const v1::MatmulResult& r = job.matmul_result();
  EXPECT_TRUE(r.correct());
  EXPECT_EQ(r.max_rel_err(), 0.0);
  EXPECT_EQ(r.flops_per_chip(), flops_per_chip);
  EXPECT_EQ(r.comm_bytes_total(), r.plan().comm_bytes_per_chip()) << r.plan().summary();
  EXPECT_NEAR(r.emulated_s(), r.compute_s() + r.comm_s(), 1e-12);
  EXPECT_GT(r.ratio(), 0.85);
  EXPECT_LT(r.ratio(), 1.3);
}

TEST(MatmulClusterTest, SeedExamplesAcrossWorkersAreExact) {
  // Two workers of four chips: the 2x4 mesh of seed 002.
  TestPod pod({"v5p:2x4", 1, 4, "auto"}, 0);
  ExpectExact(pod.Run(Spec("A[I_X, J_Y] * B[J_X, K_Y] -> C[I_X, K_Y]", "I=256,J=512,K=128")),
              2ull * 256 * 512 * 128 / 8);
  ExpectExact(pod.Run(Spec("X[B_X, S, M_Y] * Win[M_X, H_Y] -> Hid[B_X, S, H_Y]", "B=8,S=16,M=64,H=256")),
              2ull * 8 * 16 * 64 * 256 / 8);
  ExpectExact(pod.Run(Spec("Hid[B_X, S, H_Y] * Wout[H_Y, M_X] -> Out[B_X, S, M_Y]", "B=8,S=16,M=64,H=256")),
              2ull * 8 * 16 * 64 * 256 / 8);
  const v1::Job rs = pod.Run(Spec("A[I, J_XY] * B[J_XY, K] -> C[I_XY, K]", "I=64,J=512,K=32"));
  ExpectExact(rs, 2ull * 64 * 512 * 32 / 8);
  EXPECT_EQ(rs.matmul_result().plan().steps(1).kind(), "ReduceScatter");
}

TEST(MatmulClusterTest, AcrossSlicesOverDcn) {
  TestPod pod({"v5p:4", 2, 2, "auto"}, 0);
  const v1::Job job = pod.Run(Spec("A[I, J_DX] * B[J_DX, K] -> C[I, K]", "I=64,J=256,K=32", "D=dcn,X=x"));
  ExpectExact(job, 2ull * 64 * 256 * 32 / 8);
  EXPECT_GT(job.matmul_result().comm_bytes().at("dcn"), 0u);
}

TEST(MatmulClusterTest, BadExpressionsAreRefusedAtSubmitWithACaret) {
  TestPod pod({"v5p:2x4", 1, 4, "auto"}, 0);
  auto job = pod.Submit(Spec("A[I_X, J_X] * B[J, K] -> C[I, K]", "I=8,J=8,K=8"));
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(job.status().message()), testing::HasSubstr("forbidden sharding"));
  EXPECT_THAT(std::string(job.status().message()), testing::HasSubstr("^"));
  EXPECT_TRUE(pod.coordinator().ListJobs().jobs().empty());  // nothing queued, nothing half-made
  // The pod still runs the next job.
  ExpectExact(pod.Run(Spec("A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]", "I=16,J=16,K=16")), 2ull * 16 * 16 * 16 / 8);
}

TEST(MatmulClusterTest, PacedWallClockFollowsTheEmulatedClock) {
  // The wall clock is the emulated one stretched only while the host keeps
  // up, so the scale leaves the 8 chips' real BLIS multiplies (on 2 cores)
  // inside their paced budget: ~5 us emulated -> ~0.25 s of wall time. At
  // 1024^3 and 2e4, 8 real multiplies took 30-40 ms against a 13 ms budget.
  constexpr double kScale = 5e4;
  TestPod pod({"v5p:2x4", 1, 4, "auto"}, kScale);
  MatmulSpec spec = Spec("A[I_X, J_Y] * B[J_X, K_Y] -> C[I_X, K_Y]", "I=512,J=512,K=512");
  const v1::Job job = pod.Run(spec);
  ExpectExact(job, 2ull * 512 * 512 * 512 / 8);
  const v1::MatmulResult& r = job.matmul_result();
  EXPECT_GE(r.wall_s(), 0.97 * r.emulated_s() * kScale);
  EXPECT_LE(r.wall_s(), 1.3 * r.emulated_s() * kScale) << "host lag " << r.host_lag_s();
}

}  // namespace
}  // namespace tpuemu
