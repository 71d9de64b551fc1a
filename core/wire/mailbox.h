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
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/wire/frame.h"
#include "core/pod/link_clock.h"

namespace tpuemu {

// A chip's wait left in the mailbox (Mailbox::TakeOrHook), so that the thread
// that brings its frame can carry the chip's work on instead of waking the
// chip's thread: on a small host each wake-up is a context switch, and a frame
// from another worker arrives in the thread that also writes the next hops.
class MailboxHook {
 public:
  virtual ~MailboxHook() = default;
  // Its frame came, in a thread that may run the chip (Put's `may_run`). The
  // hook is gone from the mailbox; called outside the mailbox's lock.
  virtual void Arrived(Frame frame) = 0;
  // The chip's thread must take its frame itself (Take): it came from a
  // thread that may not run the chip, it may not be used yet (paced), or the
  // job was aborted or closed. The hook is gone; called outside the lock.
  virtual void Wake() = 0;
};

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
  // A hook left for it gets it in this thread when `may_run` (the thread
  // holds nothing the chip's work could wait for) and it is usable now;
  // otherwise the hook's chip is woken.
  void Put(Frame frame, bool may_run = false);
  // Waits for one frame. Fails when the job is aborted or nothing comes
  // within `timeout`.
  absl::StatusOr<Frame> Take(uint64_t job, int dst, int src, uint64_t tag, absl::Duration timeout);
  // Without waiting: the frame if it is here and usable; else leaves `hook`
  // for it (one per key) and returns nullopt, the hook maybe already called
  // (a frame here but not yet usable wakes it at once). Fails when the job
  // is aborted.
  absl::StatusOr<std::optional<Frame>> TakeOrHook(uint64_t job, int dst, int src, uint64_t tag, MailboxHook* hook);
  // Takes back a hook left for that frame: false when it has been (or is
  // being) called.
  bool Unhook(uint64_t job, int dst, int src, uint64_t tag);
  // Aborts an open job (its waiters wake with `why`); returns false, and does
  // nothing, for a job that is not open: an abort may not poison a job
  // number before it is used.
  bool AbortJob(uint64_t job, const absl::Status& why);
  // The worker registered again (its coordinator restarted, or had lost it):
  // the aborts remembered so far are forgotten, and those of jobs still open
  // are once they close. A coordinator restarted without its job store
  // numbers jobs from 1 again, and its job-1 must not meet the old job-1's
  // abort.
  void ForgetAborts();
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
  void AbortLocked(uint64_t job, const absl::Status& why, std::vector<MailboxHook*>& to_wake);
  void DropFramesLocked(uint64_t job);
  // Takes a frame out, no longer counted against its job's bytes.
  Entry TakeEntryLocked(std::map<Key, Entry>::iterator it);
  // Removes the job's hooks, to be woken once the lock is released.
  void TakeHooksLocked(uint64_t job, std::vector<MailboxHook*>& to_wake);

  mutable std::mutex mu_;
  std::map<int, Waiters> waiters_;  // nodes are stable: a Waiters outlives the lock
  std::map<Key, Entry> frames_;
  std::map<Key, MailboxHook*> hooks_;
  std::map<uint64_t, Job> open_;
  std::map<uint64_t, absl::Status> aborted_;  // open jobs', and the last closed ones'
  std::deque<uint64_t> closed_aborts_;        // oldest first
  std::set<uint64_t> forget_on_close_;        // open aborted jobs whose aborts are not remembered (ForgetAborts)
  uint64_t dropped_frames_ = 0;
};

}  // namespace tpuemu
