// The sending end of one directed link. Chips never block on pacing or on
// the wire, so both directions of a ring and all axes of a chip carry data at
// once. An unpaced link hands each frame to the fabric in the sending chip's
// thread; a paced link has a thread of its own, which paces its queue of
// frames on the wall clock. Neither waits for a frame to leave the host
// (Fabric::Send): only a full link (max_queued frames queued or leaving)
// makes its chip wait.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/status.h"
#include "core/pod/link_clock.h"
#include "core/wire/fabric.h"
#include "core/wire/frame.h"
#include "core/wire/job_abort.h"

namespace tpuemu {

class LinkSender {
 public:
  // `fabric` outlives the link.
  LinkSender(LinkParams params, double time_scale, Fabric& fabric, size_t max_queued = 8);
  ~LinkSender();
  LinkSender(const LinkSender&) = delete;
  LinkSender& operator=(const LinkSender&) = delete;

  // Queues a frame (paced) or sends it (unpaced); waits while `max_queued`
  // frames are queued or still leaving. False, the frame dropped, when
  // `abort` (its job's) is set while waiting: a peer that stopped reading (a
  // stopped process) would otherwise hold the sending chip. On a paced link
  // a frame of a job aborted meanwhile is dropped from the queue, and its
  // transmission under way cut short: the rest of its paced time does not
  // hold the link for later jobs (a cancelled job on a slow link once held
  // the next job's frames for minutes).
  bool Enqueue(Frame frame, std::shared_ptr<const JobAbort> abort = nullptr);
  // Enqueue without waiting: false, the frame left with the caller, when the
  // link is full (for a thread that must not block: the one whose completions
  // make room).
  bool TryEnqueue(Frame& frame, std::shared_ptr<const JobAbort> abort = nullptr);
  // The first delivery error of a job, if any.
  absl::Status JobStatus(uint64_t job);
  // Drops the job's error, and those of its frames still leaving when they
  // fail later (a stream to a stopped peer fails them only when cancelled).
  void ForgetJob(uint64_t job);

 private:
  // Shared with the fabric's completions, which may come after the link is
  // gone (a stream to a stopped peer fails only when it is cancelled).
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    size_t leaving = 0;  // frames queued, or handed to the fabric and not yet left
    struct JobFrames {
      size_t leaving = 0;
      absl::Status error;  // the first
      bool forgotten = false;  // erased once its last frame has left
    };
    std::map<uint64_t, JobFrames> jobs;  // those with frames leaving or an error
    void Left(uint64_t job, absl::Status status);
  };
  struct Queued {
    Frame frame;
    WallClock::time_point ready;
    std::shared_ptr<const JobAbort> abort;  // its job's, if given
  };
  // Queues (paced) or sends a frame once there is room; takes `lock`.
  void Admit(std::unique_lock<std::mutex> lock, Frame&& frame, std::shared_ptr<const JobAbort> abort);
  // To the fabric, without waiting; the frame stops counting as leaving when
  // the fabric says it has left.
  void HandOver(Frame&& frame);
  void Run();

  WallPacer pacer_;
  Fabric& fabric_;
  size_t max_queued_;
  std::shared_ptr<State> state_ = std::make_shared<State>();
  std::deque<Queued> queue_;  // paced links, under state_->mu
  bool stop_ = false;
  std::thread thread_;  // paced links only
};

}  // namespace tpuemu
