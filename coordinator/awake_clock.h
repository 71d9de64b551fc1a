// The clock the coordinator judges heartbeats by: real time less the spans
// in which the coordinator itself did not run (its process stopped, or
// starved of CPU for a second and more). Heartbeats sent meanwhile wait in
// its sockets unread; counting that time against the workers had a
// coordinator stopped for 6 s count a healthy worker lost when it woke.
#pragma once

#include <algorithm>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tpuemu {

class AwakeClock {
 public:
  // `longest_nap`: a gap between two readings longer than this is time the
  // coordinator slept. The registry reads the clock every tenth of a second.
  explicit AwakeClock(absl::Duration longest_nap = absl::Seconds(1)) : longest_nap_(longest_nap) {}

  absl::Time Now() { return Read(absl::Now()); }
  // As Now, at a given real time (tests).
  absl::Time Read(absl::Time real) {
    if (last_real_ != absl::InfinitePast() && real - last_real_ > longest_nap_) slept_ += real - last_real_;
    last_real_ = std::max(last_real_, real);
    return real - slept_;
  }
  absl::Duration slept() const { return slept_; }

 private:
  const absl::Duration longest_nap_;
  absl::Time last_real_ = absl::InfinitePast();
  absl::Duration slept_;
};

}  // namespace tpuemu
