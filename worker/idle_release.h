// What a worker process gives back once it has been idle for a moment: the
// heap its jobs freed (malloc_trim) and BLIS's packing pools. Not at each
// job's end: pages given back are faulted in again by the next job, and on
// this kind of guest that cost a paced 32 MiB all-gather 5-20% of its wall
// time (341 ms -> 355-404 ms against 337 ms emulated), so jobs that follow
// each other keep the heap warm and an idle pod returns to its idle size.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace tpuemu {

class IdleRelease {
 public:
  // After this long with no job held, the process gives its memory back.
  static constexpr std::chrono::milliseconds kDelay{2000};

  // One per process: the heap and BLIS's pools are the process's, and a test
  // runs several workers in one. It gives back BLIS's pools and the freed heap.
  static IdleRelease& Process();

  // Calls `release` once nothing has been held for `delay` since the last
  // hold ended (and only if something was held since the last release).
  IdleRelease(std::function<void()> release, std::chrono::milliseconds delay);
  ~IdleRelease();

  // Held from a job's prepare until its buffers are gone: while any hold
  // lives, nothing is released (BLIS's pools may not go while a thread of the
  // process multiplies).
  std::shared_ptr<void> Hold();

 private:
  void Drop();
  void Loop();

  const std::function<void()> release_;
  const std::chrono::milliseconds delay_;
  std::mutex mu_;
  bool stop_ = false;
  std::condition_variable changed_;
  int holds_ = 0;
  bool pending_ = false;  // something was held since the last release
  std::chrono::steady_clock::time_point idle_since_;
  std::thread thread_;
};

}  // namespace tpuemu
