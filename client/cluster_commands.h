// tpuemu cluster up | status | down
#pragma once

#include <string>

#include "CLI/CLI.hpp"

namespace tpuemu {

struct ClusterUpOptions {
  bool local = false;
  std::string topology;
  int slices = 1;
  int chips_per_host = 4;
  bool chips_per_host_given = false;  // false: the default above, which an error should say it is
  std::string wraparound = "auto";
  double time_scale = 0;
  std::string heartbeat_timeout;  // empty: the coordinator's default
  std::string keep_memory_for;    // empty: the workers' default
  int http_port = -1;             // the coordinator's /metrics; -1: none
  bool insecure = false;          // plaintext, no credentials
  double timeout_s = 60;
  bool json = false;
  double dcn_oversubscription = 1;  // the coordinator's --dcn-oversubscription
};

void AddClusterCommands(CLI::App& app, int* exit_code);

}  // namespace tpuemu
