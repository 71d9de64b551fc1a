// How many BLIS multiplies a process runs at once. Every emulated chip is a
// thread, so a host of 4 chips on a 2-core machine ran 4 multiplies at once,
// and a local pod of 2 such hosts 8: the cores switched between them every
// few milliseconds and each switch cost the multiply its packed blocks in
// the caches. Measured on 2 cores (docs/benchmarks.md): 8 multiplies at once
// did 6% less than 2, and the 8-chip DP step ran 4% faster with one
// multiply at a time per host. Waiters go in the order they came, so no
// chip falls behind the others it meets in collectives.
#pragma once

#include <condition_variable>
#include <cstdint>
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
  int limit() const;
  int waiting() const;  // callers blocked in Enter (tests)

 private:
  void Leave(int width);

  mutable std::mutex mu_;
  std::condition_variable turn_;
  int limit_;
  int inside_ = 0;
  uint64_t next_ticket_ = 0, serving_ = 0;  // first come, first in
};

// The process's gate, which every Gemm passes (no limit unless set).
MatmulGate& ProcessMatmulGate();

// The CPUs this process may use: its affinity mask, or fewer where a cgroup
// v2 CPU quota (a container's CPU limit) allows fewer; at least 1.
int UsableCpus();

// The CPUs cgroup v2 quotas allow (`cpu.max` of the process's cgroup, named
// in `proc_self_cgroup`'s "0::PATH" line, under `cgroup_root`, and of every
// cgroup above it: the least, rounded up); 0 where none limits them.
int CgroupCpuLimit(const std::string& proc_self_cgroup, const std::string& cgroup_root);

}  // namespace tpuemu
