// libFuzzer target: the emulated clock's busy timeline (core/base/
// busy_timeline.h), which every link and vector unit books, against a model
// that keeps one flag per time slot. Input: 3 bytes per booking (kind and
// ready, duration). Times are whole slots, exact in a double, so the two
// must agree exactly; under ASan this also catches the timeline reading a
// stretch its own booking merged away (a use after free that made emulated
// step times vary from run to run, once in a few hundred).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/base/busy_timeline.h"

namespace {

// Slot i is busy for [i, i + 1).
class SlotModel {
 public:
  // The first start from `ready` on with `duration` idle slots in a row.
  int Book(int ready, int duration) {
    for (int start = ready;; ++start) {
      int free = 0;
      while (free < duration && !Busy(start + free)) ++free;
      if (free == duration) {
        for (int i = 0; i < duration; ++i) Take(start + i);
        return start;
      }
    }
  }
  // The first and last moment of `duration` idle slots from `ready` on.
  std::pair<int, int> BookSpread(int ready, int duration) {
    int first = -1, at = ready;
    for (int left = duration; left > 0; ++at) {
      if (Busy(at)) continue;
      if (first < 0) first = at;
      Take(at);
      --left;
    }
    return {first, at};
  }
  int End() const {
    for (int i = static_cast<int>(busy_.size()) - 1; i >= 0; --i) {
      if (busy_[i]) return i + 1;
    }
    return 0;
  }

 private:
  bool Busy(int i) const { return i < static_cast<int>(busy_.size()) && busy_[i]; }
  void Take(int i) {
    if (i >= static_cast<int>(busy_.size())) busy_.resize(i + 1);
    busy_[i] = true;
  }
  std::vector<bool> busy_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tpuemu::BusyTimeline timeline;
  SlotModel model;
  for (size_t i = 0; i + 3 <= size; i += 3) {
    const bool spread = data[i] & 1;
    const int ready = data[i + 1];
    const int duration = 1 + data[i + 2] % 16;
    if (spread) {
      const auto [first, last] = timeline.BookSpread(ready, duration);
      const auto [model_first, model_last] = model.BookSpread(ready, duration);
      if (first != model_first || last != model_last) __builtin_trap();
    } else if (timeline.Book(ready, duration) != model.Book(ready, duration)) {
      __builtin_trap();
    }
    if (timeline.end() != model.End()) __builtin_trap();
  }
  return 0;
}
