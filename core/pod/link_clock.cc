#include "core/pod/link_clock.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace tpuemu {

EmuLink::Booking EmuLink::Book(double bytes, double ready) {
  Booking b;
  const double duration = bytes / params_.bw_dir;
  // A link interleaves packets: a message fills whatever idle time the link
  // has from when it is ready, around messages booked before it.
  std::tie(b.start, b.end) = busy_.BookSpread(ready, duration);
  b.arrival = b.end + params_.latency;
  bytes_ += bytes;
  return b;
}

WallPacer::WallPacer(LinkParams params, double time_scale) : params_(params), scale_(time_scale) {
  if (scale_ > 0) {
    latency_ = WallSeconds(params_.latency * scale_);
  }
}

WallClock::time_point WallPacer::Book(double bytes, WallClock::time_point ready) {
  if (scale_ <= 0) return ready;
  std::lock_guard<std::mutex> lock(mu_);
  const auto start = std::max(ready, free_);
  free_ = start + WallSeconds(bytes * scale_ / params_.bw_dir);
  return free_;
}

void WallPacer::Release(WallClock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  free_ = std::min(free_, now);
}

WallClock::duration WallPacer::Stretched(double emulated_s) const {
  return WallSeconds(emulated_s * scale_);
}

WallClock::duration WallSeconds(double seconds) {
  constexpr double kCentury = 100 * 365.25 * 24 * 3600;
  const double clamped = std::isnan(seconds) ? 0 : std::clamp(seconds, 0.0, kCentury);
  return std::chrono::duration_cast<WallClock::duration>(std::chrono::duration<double>(clamped));
}

double RooflineSeconds(const ChipProfile& chip, double flops, double hbm_bytes) {
  return std::max(flops / chip.flops_bf16, hbm_bytes / chip.hbm_bw);
}

}  // namespace tpuemu
