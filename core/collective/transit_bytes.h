// Received bytes that a chip only passes on (AllToAll blocks bound for other
// chips, as an ICI router forwards them): held where they arrived instead of
// being copied into the chip's buffer, and lent from there to the next link.
// On one host that forwards a block with no copy at all; over gRPC it spares
// the copy out of the received slices.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "core/collective/plan.h"
#include "core/wire/frame.h"

namespace tpuemu {

class TransitBytes {
 public:
  // Buffer elements [r.offset, r.end()) are elements [first, first + r.len)
  // of `frame`.
  void Hold(Range r, const std::shared_ptr<const Frame>& frame, uint64_t first);
  // Forgets whatever is held in r: the chip's buffer holds it now.
  void Release(Range r);
  // Appends buffer range r to `out` as segments: held elements lent from
  // where they arrived, the rest from `buffer`.
  void Lend(const std::shared_ptr<float[]>& buffer, Range r, std::vector<Segment>* out) const;
  bool empty() const { return held_.empty(); }
  void Clear() { held_.clear(); }

 private:
  struct Held {
    uint64_t len;
    std::shared_ptr<const Frame> frame;
    uint64_t first;
  };
  std::map<uint64_t, Held> held_;  // by buffer offset; never overlapping
};

}  // namespace tpuemu
