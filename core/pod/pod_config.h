// What every worker needs to know about the pod it belongs to.
#pragma once

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/pod/topology.h"

namespace tpuemu {

// The most a pod stretches its wall clock (--time-scale): an emulated
// nanosecond takes a wall second (a test makes a multiply last a minute
// with 4e8). One near a double's range rounds every wait to nothing.
inline constexpr double kMaxTimeScale = 1e9;

inline absl::Status CheckTimeScale(double time_scale, const std::string& flag) {
  if (time_scale >= 0 && time_scale <= kMaxTimeScale) return absl::OkStatus();  // NaN fails both
  return absl::InvalidArgumentError(absl::StrCat(flag, " ", time_scale, ": must be 0 (unpaced) or a stretch factor "
                                                 "above 0 and at most ", kMaxTimeScale));
}

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
