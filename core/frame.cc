#include "core/frame.h"

#include <malloc.h>

#include <algorithm>
#include <cstring>

namespace tpuemu {

void KeepChunkBuffersInHeap() {
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  // One arena: with one per thread, gRPC's receive buffers and our chunks
  // land in arenas that are trimmed and re-faulted over and over (measured:
  // all-gather over gRPC ~35% faster with a single arena).
  mallopt(M_ARENA_MAX, 1);
}

size_t Frame::elements() const {
  if (!lent.empty()) {
    size_t n = 0;
    for (const Segment& s : lent) n += s.elements;
    return n;
  }
  if (received) return received->size() / sizeof(float);
  return payload.size();
}

const float* Frame::contiguous() const {
  if (!lent.empty()) return lent.size() == 1 ? lent[0].data : nullptr;
  if (received) return received->contiguous();
  return payload.data();
}

void Frame::CopyOut(size_t first, size_t n, float* dst) const {
  if (lent.size() > 1) {
    for (const Segment& s : lent) {
      if (n == 0) break;
      if (first >= s.elements) {
        first -= s.elements;
        continue;
      }
      const size_t take = std::min(n, s.elements - first);
      std::memcpy(dst, s.data + first, take * sizeof(float));
      dst += take;
      n -= take;
      first = 0;
    }
  } else if (received) {
    received->CopyOut(first * sizeof(float), n * sizeof(float), dst);
  } else {
    std::memcpy(dst, contiguous() + first, n * sizeof(float));
  }
}

}  // namespace tpuemu
