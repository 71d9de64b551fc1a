// CPU time this process has used, every thread counted (user + system), for
// benchmarks that report how much data a path moves per CPU-second: on a
// machine with fewer cores than busy threads, that decides throughput.
#pragma once

#include <sys/resource.h>

namespace tpuemu {

inline double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

}  // namespace tpuemu
