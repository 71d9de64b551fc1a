// The host memory a training job's chips hold together, checked at submit:
// a host keeps one teacher for all its chips (core/train/host.cc), so the
// same job fits a pod of few hosts and not one of many.
#include "core/pod/topology.h"
#include "core/train/job.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

absl::StatusOr<TrainJob> Plan(int chips_per_host) {
  auto topo = Topology::Create({"v5p:2x4", 1, chips_per_host, "auto"});
  EXPECT_TRUE(topo.ok()) << topo.status();
  // 268 M parameters: a 1.07 GB teacher in fp32.
  auto spec = ParseTrainSpec("name: big\nemb_dim: 4096\nmlp_dim: 16384\nnum_layers: 2\nglobal_batch_tokens: 8\n",
                             "big.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return PlanTrainJob(*spec, *topo, 0);
}

TEST(TrainHostMemoryTest, TheTeacherIsCountedOncePerHost) {
  EXPECT_TRUE(Plan(4).ok()) << "2 hosts, 2 teachers: " << Plan(4).status();
  const auto eight_hosts = Plan(1);
  ASSERT_FALSE(eight_hosts.ok());
  EXPECT_THAT(eight_hosts.status().message(), testing::HasSubstr("MiB of host memory (limit 12288 MiB)"));
  EXPECT_THAT(eight_hosts.status().message(), testing::HasSubstr("every host keeps the whole teacher"));
}

}  // namespace
}  // namespace tpuemu
