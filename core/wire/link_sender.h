// The sending end of one directed link: a bounded queue of frames served by
// its own thread, which paces them on the wall clock and hands them to the
// fabric. Chips never block on pacing, so both directions of a ring and all
// axes of a chip carry data at once.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "core/wire/frame.h"
#include "core/wire/job_abort.h"
#include "core/pod/link_clock.h"

namespace tpuemu {

class LinkSender {
 public:
  using DeliverFn = std::function<absl::Status(Frame&&)>;

  // `inline_delivery`: an unpaced link to a chip on this host delivers in
  // the sending chip's thread, since a mailbox hand-off never blocks (one
  // thread hop less per chunk). Other links need their thread: a paced link
  // sleeps, and a gRPC write blocks until the peer has room.
  LinkSender(LinkParams params, double time_scale, DeliverFn deliver, size_t max_queued = 8,
             bool inline_delivery = false);
  ~LinkSender();
  LinkSender(const LinkSender&) = delete;
  LinkSender& operator=(const LinkSender&) = delete;

  // Queues a frame; waits while `max_queued` frames are already queued.
  // Delivers it at once when the link is inline. False, the frame dropped,
  // when `abort` (its job's) is set while waiting: a peer that stopped
  // reading (a stopped process) would otherwise hold the sending chip.
  bool Enqueue(Frame frame, const JobAbort* abort = nullptr);
  // The first delivery error of a job, if any.
  absl::Status JobStatus(uint64_t job);
  void ForgetJob(uint64_t job);

 private:
  void Run();

  WallPacer pacer_;
  DeliverFn deliver_;
  size_t max_queued_;
  bool inline_;
  std::mutex mu_;
  std::condition_variable cv_;
  struct Queued {
    Frame frame;
    WallClock::time_point ready;
  };
  std::deque<Queued> queue_;
  std::map<uint64_t, absl::Status> job_errors_;
  bool stop_ = false;
  std::thread thread_;  // not started for an inline link
};

}  // namespace tpuemu
