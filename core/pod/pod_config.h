// What every worker needs to know about the pod it belongs to.
#pragma once

#include <map>
#include <string>

#include "core/pod/topology.h"

namespace tpuemu {

struct PodConfig {
  TopologyRequest topology;
  double time_scale = 0;
  std::map<int, std::string> host_addresses;  // global host index -> host:port
};

}  // namespace tpuemu
