#include "core/collective/transit_bytes.h"

#include <algorithm>

namespace tpuemu {

void TransitBytes::Hold(Range r, const std::shared_ptr<const Frame>& frame, uint64_t first) {
  Release(r);
  held_[r.offset] = {r.len, frame, first};
}

void TransitBytes::Release(Range r) {
  auto it = held_.lower_bound(r.offset);
  if (it != held_.begin() && std::prev(it)->first + std::prev(it)->second.len > r.offset) --it;
  while (it != held_.end() && it->first < r.end()) {
    const uint64_t start = it->first;
    const Held h = it->second;
    it = held_.erase(it);
    // Keep the parts of the held piece outside r.
    if (start < r.offset) held_[start] = {r.offset - start, h.frame, h.first};
    if (start + h.len > r.end()) {
      held_[r.end()] = {start + h.len - r.end(), h.frame, h.first + (r.end() - start)};
      break;
    }
  }
}

void TransitBytes::Lend(const std::shared_ptr<float[]>& buffer, Range r, std::vector<Segment>* out) const {
  auto lend_buffer = [&](uint64_t from, uint64_t to) {
    if (to > from) {
      out->push_back({reinterpret_cast<const std::byte*>(buffer.get() + from), (to - from) * sizeof(float), buffer});
    }
  };
  auto it = held_.upper_bound(r.offset);
  if (it != held_.begin() && std::prev(it)->first + std::prev(it)->second.len > r.offset) --it;
  uint64_t pos = r.offset;
  for (; it != held_.end() && it->first < r.end(); ++it) {
    const auto& [start, h] = *it;
    lend_buffer(pos, start);
    pos = std::max(pos, start);
    const uint64_t end = std::min(r.end(), start + h.len);
    h.frame->Lend(h.first + (pos - start), end - pos, h.frame, out);
    pos = end;
  }
  lend_buffer(pos, r.end());
}

}  // namespace tpuemu
