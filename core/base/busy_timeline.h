// When one resource (a link, a chip's vector unit) is busy on the emulated
// clock. Work of a given duration, ready at a given time, takes the earliest
// idle time from then on, so work that becomes ready early is not held behind
// work booked before it that was not ready yet: a link sends what it has, in
// the order it has it, whatever order its chip's program asked in. A unit of
// work that cannot be cut (an add) takes one idle stretch that fits (Book);
// a message, cut into packets, takes idle time wherever there is some
// (BookSpread).
#pragma once

#include <algorithm>
#include <iterator>
#include <map>
#include <utility>

namespace tpuemu {

class BusyTimeline {
 public:
  // Books `duration` from the first idle moment at or after `ready` with room
  // for it; returns its start.
  double Book(double ready, double duration) {
    double start = ready;
    auto next = busy_.upper_bound(start);
    if (next != busy_.begin()) {
      auto before = std::prev(next);
      if (before->second > start) start = before->second;
    }
    while (next != busy_.end() && next->first < start + duration) {
      start = std::max(start, next->second);
      ++next;
    }
    Insert(start, start + duration);
    return start;
  }

  // Books `duration` of idle time from `ready` on, in as many idle stretches
  // as it takes (work cut into packets that share the resource with work
  // booked before); returns its first and last moment.
  std::pair<double, double> BookSpread(double ready, double duration) {
    double at = ready, left = duration, first = -1;
    while (true) {
      // Past the stretch `at` is in, if any.
      auto next = busy_.upper_bound(at);
      if (next != busy_.begin()) {
        auto before = std::prev(next);
        if (before->second > at) at = before->second;
      }
      // Read before Insert: filling the gap up to `next` joins it to the
      // stretch booked here and erases its node.
      const bool last = next == busy_.end();
      const double next_end = last ? at : next->second;
      const double room = last ? left : std::min(left, next->first - at);
      if (room > 0) {
        if (first < 0) first = at;
        Insert(at, at + room);
        at += room;
        left -= room;
      }
      if (left <= duration * 1e-12 || last) break;
      at = std::max(at, next_end);
    }
    return {first < 0 ? at : first, at};
  }

  // The end of the last busy stretch (0 if never busy).
  double end() const { return busy_.empty() ? 0 : busy_.rbegin()->second; }

 private:
  // Adds [from, to), which overlaps nothing, joining the stretches it touches.
  void Insert(double from, double to) {
    if (to <= from) return;
    auto next = busy_.lower_bound(from);
    if (next != busy_.end() && next->first == to) {
      to = next->second;
      next = busy_.erase(next);
    }
    if (next != busy_.begin()) {
      auto before = std::prev(next);
      if (before->second == from) {
        before->second = to;
        return;
      }
    }
    busy_.emplace_hint(next, from, to);
  }

  std::map<double, double> busy_;  // start -> end, disjoint, not touching
};

}  // namespace tpuemu
