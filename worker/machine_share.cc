#include "worker/machine_share.h"

#include <algorithm>
#include <fstream>

namespace tpuemu {

std::string ThisMachine() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  f >> id;
  return id;
}

MachineShare ShareOfMachine(const PodConfig& config, const std::string& machine, int cpus) {
  if (machine.empty()) return {};
  const int here = static_cast<int>(std::count_if(config.host_machines.begin(), config.host_machines.end(),
                                                  [&](const auto& host) { return host.second == machine; }));
  if (here == 0) return {};
  return {here, std::max(1, cpus / here)};
}

}  // namespace tpuemu
