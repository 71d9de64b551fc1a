// A value per element range with "assign on a range" and "max over a range",
// used for the emulated ready time of data and for the last receive that
// wrote a range. Ranges are element offsets in a chip's virtual buffer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>

namespace tpuemu {

template <typename T>
class IntervalMax {
 public:
  explicit IntervalMax(T unset) : unset_(unset) {}

  void Assign(uint64_t lo, uint64_t hi, T value) {
    if (lo >= hi) return;
    Split(lo);
    Split(hi);
    auto first = segs_.lower_bound(lo);
    auto last = segs_.lower_bound(hi);
    segs_.erase(first, last);
    segs_[lo] = {hi, value};
  }

  T Max(uint64_t lo, uint64_t hi) const {
    T best = unset_;
    auto it = segs_.upper_bound(lo);
    if (it != segs_.begin()) --it;
    for (; it != segs_.end() && it->first < hi; ++it) {
      if (it->second.end <= lo) continue;
      best = std::max(best, it->second.value);
    }
    return best;
  }

  // Calls fn(from, to, value) for each set segment's part inside [lo, hi), in order.
  template <typename Fn>
  void ForEach(uint64_t lo, uint64_t hi, Fn&& fn) const {
    auto it = segs_.upper_bound(lo);
    if (it != segs_.begin()) --it;
    for (; it != segs_.end() && it->first < hi; ++it) {
      if (it->second.end <= lo) continue;
      fn(std::max(lo, it->first), std::min(hi, it->second.end), it->second.value);
    }
  }

 private:
  struct Seg {
    uint64_t end;
    T value;
  };
  // Makes `at` a segment boundary.
  void Split(uint64_t at) {
    auto it = segs_.upper_bound(at);
    if (it == segs_.begin()) return;
    --it;
    if (it->first < at && at < it->second.end) {
      Seg right{it->second.end, it->second.value};
      it->second.end = at;
      segs_[at] = right;
    }
  }

  T unset_;
  std::map<uint64_t, Seg> segs_;
};

}  // namespace tpuemu
