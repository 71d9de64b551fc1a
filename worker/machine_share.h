// Workers that run on one machine share its cores: each lets at most its
// share of them multiply at once (core/tensor/matmul_gate.h). A worker cannot
// see the others from inside its container, so it names its machine when it
// registers (the kernel's boot id, the same in every container and process on
// one kernel), the coordinator passes every worker's name in the pod's
// configuration, and each counts the workers on its own machine. Under a
// cgroup v2 CPU quota the "machine" is the quota: the name adds the worker's
// cgroup, so that workers in one limited container (a local pod inside it)
// split its quota, and a container with a quota of its own keeps it.
#pragma once

#include <string>

#include "core/pod/pod_config.h"

namespace tpuemu {

// This machine's name for the count: its kernel's boot id, and under a CPU
// quota its cgroup (the directory's inode: the same path may name different
// cgroups in different containers); "" if the boot id is unreadable.
std::string ThisMachine();

// A worker's share of its machine: how many of the pod's workers run on
// `machine`, and how many chips each may let multiply at once out of the
// `cpus` it may use (an equal share, at least 1). Both 0 when the
// configuration names no worker on `machine` (a coordinator that does not
// pass the names, or no name here).
struct MachineShare {
  int workers = 0;
  int matmuls_at_once = 0;
};
MachineShare ShareOfMachine(const PodConfig& config, const std::string& machine, int cpus);

}  // namespace tpuemu
