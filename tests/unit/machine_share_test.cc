// A worker's share of its machine's cores, counted from the pod's
// configuration (worker/machine_share.h).
#include "worker/machine_share.h"

#include <fstream>

#include "core/tensor/matmul_gate.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

PodConfig WithMachines(std::map<int, std::string> machines) {
  PodConfig config;
  config.host_machines = std::move(machines);
  return config;
}

TEST(MachineShareTest, AnEqualShareOfTheCpusAtLeastOne) {
  const PodConfig config = WithMachines({{0, "a"}, {1, "a"}, {2, "b"}, {3, "a"}, {4, "a"}});
  EXPECT_EQ(ShareOfMachine(config, "a", 8).workers, 4);
  EXPECT_EQ(ShareOfMachine(config, "a", 8).matmuls_at_once, 2);
  EXPECT_EQ(ShareOfMachine(config, "a", 2).matmuls_at_once, 1) << "4 workers on 2 CPUs still multiply";
  EXPECT_EQ(ShareOfMachine(config, "b", 2).matmuls_at_once, 2);
}

TEST(MachineShareTest, NoNameNoShare) {
  // A coordinator that passes no names, or a worker that could not name its
  // machine: the worker keeps the limit it started with.
  EXPECT_EQ(ShareOfMachine(WithMachines({}), "a", 8).workers, 0);
  EXPECT_EQ(ShareOfMachine(WithMachines({{0, "a"}}), "", 8).matmuls_at_once, 0);
  EXPECT_EQ(ShareOfMachine(WithMachines({{0, "b"}}), "a", 8).matmuls_at_once, 0);
}

TEST(MachineShareTest, ThisMachineIsTheKernelsBootId) {
  // The same name in every process (and container) on this kernel; under a
  // CPU quota, the worker's cgroup follows it.
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  f >> boot_id;
  ASSERT_EQ(boot_id.size(), 36u) << boot_id;
  const std::string id = ThisMachine();
  EXPECT_EQ(id.substr(0, 36), boot_id);
  EXPECT_EQ(id.size() == 36, CgroupCpuLimit("/proc/self/cgroup", "/sys/fs/cgroup") == 0) << id;
  EXPECT_EQ(ThisMachine(), id);
}

}  // namespace
}  // namespace tpuemu
