#include "worker/machine_share.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "core/tensor/matmul_gate.h"

namespace tpuemu {

std::string ThisMachine() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  f >> id;
  if (id.empty() || CgroupCpuLimit("/proc/self/cgroup", "/sys/fs/cgroup") == 0) return id;
  struct stat cgroup {};
  if (stat(("/sys/fs/cgroup" + CgroupPath("/proc/self/cgroup")).c_str(), &cgroup) != 0) return id;
  return absl::StrCat(id, " cgroup ", cgroup.st_ino);
}

MachineShare ShareOfMachine(const PodConfig& config, const std::string& machine, int cpus) {
  if (machine.empty()) return {};
  const int here = static_cast<int>(std::count_if(config.host_machines.begin(), config.host_machines.end(),
                                                  [&](const auto& host) { return host.second == machine; }));
  if (here == 0) return {};
  return {here, std::max(1, cpus / here)};
}

}  // namespace tpuemu
