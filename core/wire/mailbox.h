// Where frames wait for the chip that will consume them, keyed by
// (job, destination, source, tag), so frames may arrive in any order.
//
// Frames come from other workers, so the mailbox trusts nothing about them:
// it takes frames only for jobs this host has opened (a job's HostJob opens it
// for as long as it lives), up to the bytes that job may hold here, and drops
// (and counts) the rest. Aborts apply only to jobs that are open.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/wire/frame.h"
#include "core/pod/link_clock.h"

namespace tpuemu {

class Mailbox {
 public:
  // The job exists on this host: its frames are taken, holding at most
  // `max_buffered_bytes` of payload at once. Opening an open job keeps it.
  void OpenJob(uint64_t job, uint64_t max_buffered_bytes);
  // The job is over here: its frames are dropped, and later ones are dropped
  // as a closed job's. Its abort, if any, is remembered (a bounded number of
  // them), so that a late RunJob of an aborted job fails at once.
  void CloseJob(uint64_t job);
  // Accepts a frame that has left its link; it becomes usable after the
  // frame's paced latency. A frame of a job that is not open is dropped and
  // counted; one that would take its job past its bytes aborts that job.
  void Put(Frame frame);
  // Waits for one frame. Fails when the job is aborted or nothing comes
  // within `timeout`.
  absl::StatusOr<Frame> Take(uint64_t job, int dst, int src, uint64_t tag, absl::Duration timeout);
  // Aborts an open job (its waiters wake with `why`); returns false, and does
  // nothing, for a job that is not open: an abort may not poison a job
  // number before it is used.
  bool AbortJob(uint64_t job, const absl::Status& why);
  // Drops whatever a job's run left behind (training runs a step at a time).
  void ClearJob(uint64_t job);
  size_t pending() const;
  // Frames dropped because their job was not open here.
  uint64_t dropped_frames() const;

  // Aborts remembered after their jobs closed.
  static constexpr size_t kRememberedAborts = 64;

 private:
  using Key = std::tuple<uint64_t, int, int, uint64_t>;
  struct Entry {
    Frame frame;
    WallClock::time_point usable_at;
    uint64_t bytes;
  };
  struct Job {
    uint64_t max_buffered_bytes = 0;
    uint64_t buffered_bytes = 0;
  };
  // A destination chip's waiters: what each is waiting for, and where it
  // sleeps. A frame wakes a chip only when it is a frame the chip waits for,
  // not every chip of the host nor a chip waiting for another link's frame:
  // on a small host each needless wake-up is a context switch.
  struct Waiters {
    std::condition_variable cv;
    std::multiset<Key> keys;
  };
  void AbortLocked(uint64_t job, const absl::Status& why);
  void DropFramesLocked(uint64_t job);

  mutable std::mutex mu_;
  std::map<int, Waiters> waiters_;  // nodes are stable: a Waiters outlives the lock
  std::map<Key, Entry> frames_;
  std::map<uint64_t, Job> open_;
  std::map<uint64_t, absl::Status> aborted_;  // open jobs', and the last closed ones'
  std::deque<uint64_t> closed_aborts_;        // oldest first
  uint64_t dropped_frames_ = 0;
};

}  // namespace tpuemu
