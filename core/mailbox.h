// Where frames wait for the chip that will consume them, keyed by
// (job, destination, source, tag), so frames may arrive in any order.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/frame.h"
#include "core/link_clock.h"

namespace tpuemu {

class Mailbox {
 public:
  // Accepts a frame that has left its link; it becomes usable after the
  // frame's paced latency.
  void Put(Frame frame);
  // Waits for one frame. Fails when the job is aborted or nothing comes
  // within `timeout`.
  absl::StatusOr<Frame> Take(uint64_t job, int dst, int src, uint64_t tag, absl::Duration timeout);
  void AbortJob(uint64_t job, const absl::Status& why);
  // Drops whatever a finished or aborted job left behind.
  void ClearJob(uint64_t job);
  size_t pending() const;

 private:
  using Key = std::tuple<uint64_t, int, int, uint64_t>;
  struct Entry {
    Frame frame;
    WallClock::time_point usable_at;
  };
  // A destination chip's waiters: what each is waiting for, and where it
  // sleeps. A frame wakes a chip only when it is a frame the chip waits for,
  // not every chip of the host nor a chip waiting for another link's frame:
  // on a small host each needless wake-up is a context switch.
  struct Waiters {
    std::condition_variable cv;
    std::multiset<Key> keys;
  };
  mutable std::mutex mu_;
  std::map<int, Waiters> waiters_;  // nodes are stable: a Waiters outlives the lock
  std::map<Key, Entry> frames_;
  std::map<uint64_t, absl::Status> aborted_;
};

}  // namespace tpuemu
