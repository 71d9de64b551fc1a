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
  // Global host index -> the machine it runs on, as the worker named it
  // when it registered (workers on one machine share its cores); hosts that
  // did not name one are left out.
  std::map<int, std::string> host_machines;
};

}  // namespace tpuemu
