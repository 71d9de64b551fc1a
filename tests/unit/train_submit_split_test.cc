// A training job whose collectives cannot split their arrays is refused when
// it is planned (at submit), with the planner's reason and the keys that size
// the array: before, it passed submit and failed on the workers mid-job with
// a hint that was wrong for three-axis meshes.
#include "core/pod/topology.h"
#include "core/train/job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

using testing::HasSubstr;

absl::StatusOr<TrainJob> Plan(const std::string& sizes) {
  auto topo = Topology::Create({"v5p:2x2x2", 1, 4, "auto"});
  EXPECT_TRUE(topo.ok()) << topo.status();
  auto spec = ParseTrainSpec("name: dp3d\nici_data_parallelism: -1\nici_fsdp_parallelism: 1\nnum_layers: 1\n"
                             "global_batch_tokens: 64\n" + sizes, "dp3d.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return PlanTrainJob(*spec, *topo, 0);
}

TEST(TrainSubmitSplitTest, AGradientThreeAxesCannotSplitIsRefusedWithTheRightHint) {
  // Data parallel over x, y and z: a layer's 64 x 256 gradient in 8 chips
  // and 3 axis parts needs a multiple of 24 elements (48 bytes in bf16).
  auto job = Plan("emb_dim: 64\nmlp_dim: 256\n");
  ASSERT_FALSE(job.ok());
  EXPECT_THAT(job.status().message(), HasSubstr("dp3d: a layer's gradient all-reduce over data (16384 elements"));
  EXPECT_THAT(job.status().message(), HasSubstr("3 axis parts; use a multiple of 48 bytes"));
  EXPECT_THAT(job.status().message(), HasSubstr("Its size comes from emb_dim and mlp_dim"));
  EXPECT_THAT(job.status().message(), testing::Not(HasSubstr("factors of 2")));
}

TEST(TrainSubmitSplitTest, SizesWithTheFactorOfThreeArePlanned) {
  EXPECT_TRUE(Plan("emb_dim: 96\nmlp_dim: 256\n").ok());
}

}  // namespace
}  // namespace tpuemu
