// What a worker process gives back once it has been idle for a while: the
// heap its jobs freed (malloc_trim) and BLIS's packing pools. Not at each
// job's end: pages given back are faulted in again by the next job, which
// cost a paced 32 MiB all-gather 5-20% of its wall time (341 ms -> 355-404 ms
// against 337 ms emulated), and on a VM whose host takes freed memory back
// made a one-step DP job take 10-12 s instead of 6 (docs/benchmarks.md,
// "Memory back after jobs"). So jobs that follow each other within the delay
// (--keep-memory-for) find the heap warm, and an idle pod still returns to
// its idle size.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace tpuemu {

class IdleRelease {
 public:
  // By default, after this long with no job held, the process gives its
  // memory back; and again this long after that, for what its peers' own
  // release frees here.
  static constexpr std::chrono::milliseconds kDefaultDelay{30000};
  static constexpr std::chrono::milliseconds kAgainAfter{2000};

  // One per process: the heap and BLIS's pools are the process's, and a test
  // runs several workers in one. It gives back BLIS's pools and the freed
  // heap, kDefaultDelay after a job unless set_delay says otherwise.
  static IdleRelease& Process();

  // Calls `release` once nothing has been held for `delay` since the last
  // hold ended, and once more `again` after that (only if something was held
  // since the last release): connections that peers close at their own idle
  // release free their buffers here after this process's first release.
  static constexpr int kReleasesAfterJob = 2;
  IdleRelease(std::function<void()> release, std::chrono::milliseconds delay, std::chrono::milliseconds again);
  ~IdleRelease();

  // The first release's delay from now on, counted from when the last job
  // ended: a wait under way takes it at once (and releases at once if it has
  // already passed).
  void set_delay(std::chrono::milliseconds delay);

  // Held from a job's prepare until its buffers are gone: while any hold
  // lives, nothing is released (BLIS's pools may not go while a thread of the
  // process multiplies).
  std::shared_ptr<void> Hold();

  // Also calls `release` at each release for as long as the returned handle
  // lives (a worker's links to other hosts). Dropping the handle waits out a
  // release in progress.
  std::shared_ptr<void> AlsoRelease(std::function<void()> release);

 private:
  void Drop();
  void Loop();

  const std::function<void()> release_;
  const std::chrono::milliseconds again_;
  std::mutex mu_;
  std::chrono::milliseconds delay_;
  bool stop_ = false;
  std::condition_variable changed_;
  std::map<uint64_t, std::function<void()>> also_;
  uint64_t next_also_ = 0;
  int holds_ = 0;
  int releases_due_ = 0;  // kReleasesAfterJob after a hold, down to 0
  std::chrono::steady_clock::time_point idle_since_;
  std::thread thread_;
};

}  // namespace tpuemu
