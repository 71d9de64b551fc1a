#include "coordinator/liveness.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tpuemu {
namespace {

std::string Rounded(absl::Duration d) { return absl::FormatDuration(absl::Trunc(d, absl::Milliseconds(100))); }

}  // namespace

void Liveness::Reset(absl::Time now) {
  last_heartbeat_ = now;
  last_answer_ = absl::InfinitePast();
  lost_because_.clear();
  unanswered_.clear();
  probing_ = false;
  said_slow_ = false;
}

void Liveness::Heartbeat(absl::Time now) {
  last_heartbeat_ = std::max(last_heartbeat_, now);
  lost_because_.clear();
  unanswered_.clear();
  said_slow_ = false;
}

void Liveness::Probed(absl::Time now, const absl::Status& answer, absl::Duration waited) {
  probing_ = false;
  if (answer.ok()) {
    last_answer_ = std::max(last_answer_, now);
    unanswered_.clear();
  } else if (absl::IsUnavailable(answer)) {
    lost_because_ = absl::StrCat("the connection to it was reset or closed (", answer.message(), ")");
  } else {
    unanswered_ = absl::StrCat("it did not answer a status call within ", Rounded(waited), " either (",
                               answer.message(), ")");
  }
}

bool Liveness::Alive(absl::Time now, absl::Duration timeout) const {
  return lost_because_.empty() && (now - LastSign() < timeout || Pending(now, timeout));
}

bool Liveness::Slow(absl::Time now, absl::Duration timeout) const {
  return Alive(now, timeout) && now - last_heartbeat_ >= timeout;
}

bool Liveness::BecameSlow(absl::Time now, absl::Duration timeout) {
  if (said_slow_ || !Slow(now, timeout)) return false;
  said_slow_ = true;
  return true;
}

bool Liveness::NeedsProbe(absl::Time now, absl::Duration timeout) const {
  return lost_because_.empty() && !probing_ && now - LastSign() >= timeout / 2;
}

std::string Liveness::LostReason(absl::Time now, absl::Duration timeout) const {
  if (!lost_because_.empty()) return lost_because_;
  std::string why = absl::StrCat("no heartbeat for ", Rounded(now - last_heartbeat_), " (the limit is ",
                                 absl::FormatDuration(timeout), ")");
  if (!unanswered_.empty()) {
    absl::StrAppend(&why, ", and ", unanswered_);
  } else if (probing_) {
    absl::StrAppend(&why, ", and it did not answer a status call within ", Rounded(probe_deadline_), " either");
  }
  return why;
}

absl::Duration Liveness::ProbeDeadline(absl::Duration timeout) {
  return std::min(timeout / 2, absl::Seconds(5));
}

}  // namespace tpuemu
