// The two clocks of a directed link (DESIGN §2).
#pragma once

#include <chrono>
#include <mutex>

#include "core/base/busy_timeline.h"
#include "core/pod/topology.h"

namespace tpuemu {

using WallClock = std::chrono::steady_clock;

// `seconds` of wall time on WallClock, saturated at a century: a paced
// stretch of a long emulated step (seconds x --time-scale) past int64
// nanoseconds would wrap and pace nothing.
WallClock::duration WallSeconds(double seconds);

// Emulated clock of one directed link, modelled like netem: a transfer of b
// bytes ready at t holds the link for b / W of its idle time from t on,
// interleaved with transfers booked before it as packets are
// (BusyTimeline::BookSpread), and is usable by the receiver T_hop after its
// last byte leaves the link.
class EmuLink {
 public:
  struct Booking {
    double start = 0;
    double end = 0;
    double arrival = 0;
  };

  explicit EmuLink(LinkParams params) : params_(params) {}
  Booking Book(double bytes, double ready);
  double bytes_sent() const { return bytes_; }
  const LinkParams& params() const { return params_; }
  // A degraded link from now on (core/pod/faults.h): later bookings only.
  void set_params(LinkParams params) { params_ = params; }

 private:
  LinkParams params_;
  BusyTimeline busy_;
  double bytes_ = 0;
};

// Wall-clock pacing of one directed link at time scale s > 0: the link really
// carries at most W / s bytes per second. Bookings advance a virtual wall
// deadline (never a token bucket: an idle link saves no credit).
class WallPacer {
 public:
  WallPacer(LinkParams params, double time_scale);
  bool paced() const { return scale_ > 0; }
  // Books `bytes` that were ready at `ready` and returns when they have left
  // the link: they start at max(ready, when the link is free).
  WallClock::time_point Book(double bytes, WallClock::time_point ready);
  // The link is free from `now`: what was booked past it was called off.
  void Release(WallClock::time_point now);
  // Latency the receiver adds before the data is usable.
  WallClock::duration latency() const { return latency_; }
  // Emulated seconds as this link's wall time (0 when unpaced).
  WallClock::duration Stretched(double emulated_s) const;

 private:
  LinkParams params_;
  double scale_;
  WallClock::duration latency_{0};
  std::mutex mu_;
  WallClock::time_point free_{};
};

// Roofline time of a compute op on one chip: max(flops / C, bytes / HBM_BW).
double RooflineSeconds(const ChipProfile& chip, double flops, double hbm_bytes);

}  // namespace tpuemu
