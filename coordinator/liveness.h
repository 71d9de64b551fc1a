// Whether a worker lives, as the coordinator judges it: by its heartbeats
// and, when they are late, by its connection.
//
// A host starved of CPU (a 256-chip pod on two cores) sends its heartbeats
// late although it works; a stopped or dead one sends none. So late
// heartbeats alone do not make a worker lost: once they are half the
// timeout late, the coordinator asks the worker itself over its own
// connection (a status call, answered by the worker's server threads, not
// its heartbeat thread). An answer is a sign of life like a heartbeat, and
// a question not yet answered (within its deadline) is not yet a verdict; a
// worker that answers while its heartbeats are late is "slow". A connection
// found reset or closed (the process exited) makes it lost at once; no
// heartbeat and no answer for the whole timeout (a stopped process: its TCP
// connection stays up but nothing answers) makes it lost then.
#pragma once

#include <algorithm>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace tpuemu {

class Liveness {
 public:
  // A fresh registration: counted alive from `now`.
  void Reset(absl::Time now);
  void Heartbeat(absl::Time now);
  // A probe was sent at `now`; until its outcome, or its deadline, the
  // worker counts as alive. (The deadline is kept here too: a gRPC call
  // to a worker whose handlers all wait was seen to outlive its own
  // deadline by seconds, in one process.)
  void ProbeStarted(absl::Time now, absl::Duration deadline) {
    probing_ = true;
    probe_started_ = now;
    probe_expires_ = now + deadline;
    probe_deadline_ = deadline;
  }
  // A probe's outcome: OK (an answer at `now`), Unavailable (the connection
  // is gone: lost at once) or anything else (no answer in time).
  void Probed(absl::Time now, const absl::Status& answer, absl::Duration waited);
  // Counted lost now, whatever the heartbeats say, until the next heartbeat.
  void MarkLost(const std::string& because) { lost_because_ = because; }

  bool Alive(absl::Time now, absl::Duration timeout) const;
  // Alive only because it answers: its heartbeats are a timeout late.
  bool Slow(absl::Time now, absl::Duration timeout) const;
  // True the first time it is found slow since its last heartbeat (to log).
  bool BecameSlow(absl::Time now, absl::Duration timeout);
  // Whether to ask the worker now (its heartbeats are half a timeout late).
  bool NeedsProbe(absl::Time now, absl::Duration timeout) const;
  absl::Duration SinceHeartbeat(absl::Time now) const { return now - last_heartbeat_; }
  // What the coordinator saw of a worker it counts as lost.
  std::string LostReason(absl::Time now, absl::Duration timeout) const;

  // How long a probe may take: half the timeout, so that a worker that
  // answers nothing is lost a timeout after its last heartbeat, as before
  // probes; at most 5 s, so that the coordinator's shutdown waits no longer.
  static absl::Duration ProbeDeadline(absl::Duration timeout);

 private:
  absl::Time LastSign() const { return std::max(last_heartbeat_, last_answer_); }

  absl::Time last_heartbeat_ = absl::InfinitePast();
  absl::Time last_answer_ = absl::InfinitePast();
  std::string lost_because_;
  std::string unanswered_;  // the last probe's failure, for the lost reason
  // A probe still within its deadline, sent while the worker was alive: a
  // worker already counted lost is not alive again for being asked anew.
  bool Pending(absl::Time now, absl::Duration timeout) const {
    return probing_ && now < probe_expires_ && probe_started_ - LastSign() < timeout;
  }

  bool probing_ = false;  // a probe is in flight
  absl::Time probe_started_;
  absl::Time probe_expires_;
  absl::Duration probe_deadline_;
  bool said_slow_ = false;
};

}  // namespace tpuemu
