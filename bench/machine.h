// The machine a bench program's figures come from, as its first line: a
// figure read without its CPU says little here, where the same program gives
// half as much on one VM's loopback as on another's, and BLIS's choice of
// kernel follows the CPU family (docs/benchmarks.md).
#pragma once

#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "core/tensor/matmul_gate.h"

namespace tpuemu {

// "machine: 2 cores, 23 GiB, AMD EPYC (cpu family 26), kernel 6.18.0" (GiB rounded down,
// as `free -g` gives them to the shell benches)
inline std::string MachineLine() {
  std::string model = "unknown CPU", family;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos || colon + 2 > line.size()) continue;
    const std::string key = line.substr(0, line.find_first_of("\t:")), value = line.substr(colon + 2);
    if (key == "model name" && model == "unknown CPU") model = value;
    if (key == "cpu family" && family.empty()) family = value;
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  utsname un{};
  uname(&un);
  char out[512];
  // The cores this process may use: its affinity (as `nproc` counts them) and a cgroup v2 quota.
  std::snprintf(out, sizeof out, "machine: %d cores, %lld GiB, %s%s, kernel %s", UsableCpus(),
                static_cast<long long>(pages) * page >> 30, model.c_str(),
                family.empty() ? "" : (" (cpu family " + family + ")").c_str(), un.release);
  return out;
}

inline void PrintMachine() { std::printf("%s\n", MachineLine().c_str()); }

}  // namespace tpuemu
