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

TEST(TrainSubmitSplitTest, AGradientThatCannotSplitIsRefusedWithTheRightHint) {
  // Data parallel over x, y and z: a layer's 3 x 3 gradient does not split
  // over 8 chips.
  auto job = Plan("emb_dim: 3\nmlp_dim: 3\n");
  ASSERT_FALSE(job.ok());
  EXPECT_THAT(job.status().message(), HasSubstr("dp3d: a layer's gradient all-reduce over data (9 elements"));
  EXPECT_THAT(job.status().message(), HasSubstr("split evenly over the 8 chips of the group"));
  EXPECT_THAT(job.status().message(), HasSubstr("Its size comes from emb_dim and mlp_dim"));
  EXPECT_THAT(job.status().message(), testing::Not(HasSubstr("factors of 2")));
}

TEST(TrainSubmitSplitTest, PowerOfTwoSizesArePlannedOverThreeAxes) {
  // The three axis parts are sized by their links' shares, not equal: no
  // factor of 3 is needed (before, every power-of-two model was refused).
  EXPECT_TRUE(Plan("emb_dim: 64\nmlp_dim: 256\n").ok());
  EXPECT_TRUE(Plan("emb_dim: 96\nmlp_dim: 256\n").ok());
}

}  // namespace
}  // namespace tpuemu
