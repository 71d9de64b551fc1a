// How many BLIS multiplies a process runs at once. Every emulated chip is a
// thread, so a host of 4 chips on a 2-core machine ran 4 multiplies at once,
// and a local pod of 2 such hosts 8: the cores switched between them every
// few milliseconds and each switch cost the multiply its packed blocks in
// the caches. Measured on 2 cores (docs/benchmarks.md): 8 multiplies at once
// did about a tenth less than 2, and the 8-chip DP step ran 4% faster with one
// multiply at a time per host.
// Not first come, first in: a thread that has just multiplied may go on
// while others wait, as with a semaphore. Handing the core to the longest
// waiter after every multiply cost 13-23% on `matmul_bench --sustained 8 8
// 2` (most likely as the woken thread lands on the other, busy core). A chip
// may wait while another goes through all its multiplies, but no longer:
// a host's chips all belong to one job and meet in its collectives, where
// the one going on stops and lets the others in.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>

namespace tpuemu {

class MatmulGate {
 public:
  // 0: no limit.
  explicit MatmulGate(int limit = 0) : limit_(limit) {}

  // Held while multiplying; leaves the gate when destroyed.
  class Pass {
   public:
    Pass(MatmulGate* gate, int width) : gate_(gate), width_(width) {}
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;
    ~Pass() { gate_->Leave(width_); }

   private:
    MatmulGate* gate_;
    int width_;
  };

  // Blocks until the multiply fits under the limit, counting `width` for a
  // multiply on several threads (at most the whole limit).
  [[nodiscard]] Pass Enter(int width = 1);

  void set_limit(int limit);
  int waiting() const;  // callers blocked in Enter (tests)

 private:
  int Counted(int width) const;
  void Leave(int width);

  mutable std::mutex mu_;
  std::condition_variable room_;
  int limit_;
  int inside_ = 0, waiting_ = 0;
  int wide_waiting_ = 0;  // waiters counting more than 1
};

// The process's gate, which every Gemm passes (no limit unless set).
MatmulGate& ProcessMatmulGate();

// The CPUs this process may use: its affinity mask, or fewer where a cgroup
// v2 CPU quota (a container's CPU limit) allows fewer; at least 1.
int UsableCpus();

// The process's cgroup v2 path, from `proc_self_cgroup`'s "0::PATH" line; ""
// without one.
std::string CgroupPath(const std::string& proc_self_cgroup);

// The CPUs cgroup v2 quotas allow (`cpu.max` of the process's cgroup, named
// in `proc_self_cgroup`'s "0::PATH" line, under `cgroup_root`, and of every
// cgroup above it: the least, rounded up); 0 where none limits them.
int CgroupCpuLimit(const std::string& proc_self_cgroup, const std::string& cgroup_root);

}  // namespace tpuemu
