// What a worker process gives back once it has been idle for a moment: the
// heap its jobs freed (malloc_trim) and BLIS's packing pools. Not at each
// job's end: pages given back are faulted in again by the next job, and on
// this kind of guest that cost a paced 32 MiB all-gather 5-20% of its wall
// time (341 ms -> 355-404 ms against 337 ms emulated), so jobs that follow
// each other keep the heap warm and an idle pod returns to its idle size.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

namespace tpuemu {

class IdleRelease {
 public:
  // After this long with no job held, the process gives its memory back.
  static constexpr std::chrono::milliseconds kDelay{2000};

  // One per process: the heap and BLIS's pools are the process's, and a test
  // runs several workers in one.
  static IdleRelease& Process();

  // Held from a job's prepare until its buffers are gone: while any hold
  // lives, nothing is released (BLIS's pools may not go while a thread of the
  // process multiplies).
  std::shared_ptr<void> Hold();

 private:
  IdleRelease();
  void Drop();
  void Loop();

  std::mutex mu_;
  std::condition_variable changed_;
  int holds_ = 0;
  bool pending_ = false;  // something was held since the last release
  std::chrono::steady_clock::time_point idle_since_;
  std::thread thread_;
};

}  // namespace tpuemu
