#include "core/tensor/matmul_gate.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

namespace tpuemu {

int MatmulGate::Counted(int width) const { return limit_ > 0 ? std::clamp(width, 1, limit_) : std::max(width, 1); }

MatmulGate::Pass MatmulGate::Enter(int width) {
  std::unique_lock<std::mutex> lock(mu_);
  ++waiting_;
  wide_waiting_ += width > 1;
  room_.wait(lock, [&] { return limit_ <= 0 || inside_ + Counted(width) <= limit_; });
  --waiting_;
  wide_waiting_ -= width > 1;
  // Counted as the limit stands now, and left with the same count.
  const int counted = Counted(width);
  inside_ += counted;
  return Pass(this, counted);
}

void MatmulGate::Leave(int width) {
  bool wide = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    inside_ -= width;
    wide = wide_waiting_ > 0;
  }
  // One waiter, unless one of them is wide: a wide one woken might not fit
  // where a single one would, which would then sleep until the next Leave.
  if (wide) {
    room_.notify_all();
  } else {
    room_.notify_one();
  }
}

void MatmulGate::set_limit(int limit) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    limit_ = limit;
  }
  room_.notify_all();
}

int MatmulGate::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_;
}

MatmulGate& ProcessMatmulGate() {
  static MatmulGate gate;
  return gate;
}

std::string CgroupPath(const std::string& proc_self_cgroup) {
  std::ifstream self(proc_self_cgroup);
  std::string line, path;
  while (std::getline(self, line)) {
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  }
  return path;
}

int CgroupCpuLimit(const std::string& proc_self_cgroup, const std::string& cgroup_root) {
  std::string path = CgroupPath(proc_self_cgroup);
  if (path.empty() || path[0] != '/') return 0;
  int limit = 0;
  for (;;) {
    std::ifstream max(cgroup_root + (path == "/" ? "" : path) + "/cpu.max");
    std::string quota;
    double period = 0;
    if (max >> quota >> period && quota != "max" && period > 0) {
      const int cpus = std::max(1, static_cast<int>(std::ceil(std::strtod(quota.c_str(), nullptr) / period)));
      limit = limit == 0 ? cpus : std::min(limit, cpus);
    }
    if (path == "/") return limit;
    path = path.substr(0, path.rfind('/'));
    if (path.empty()) path = "/";
  }
}

int UsableCpus() {
  cpu_set_t set;
  // (A machine of more than CPU_SETSIZE CPUs fails the call: then all of them.)
  int cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set)
                                                          : static_cast<int>(std::thread::hardware_concurrency());
  if (const int limit = CgroupCpuLimit("/proc/self/cgroup", "/sys/fs/cgroup"); limit > 0) cpus = std::min(cpus, limit);
  return std::max(1, cpus);
}

}  // namespace tpuemu
