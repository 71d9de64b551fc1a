#include "core/frame.h"

#include <malloc.h>

#include <cstring>

namespace tpuemu {

void KeepChunkBuffersInHeap() {
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

size_t Frame::elements() const {
  if (lent) return lent_elements;
  if (received) return received->size() / sizeof(float);
  return payload.size();
}

const float* Frame::contiguous() const {
  if (lent) return lent;
  if (received) return received->contiguous();
  return payload.data();
}

void Frame::CopyOut(size_t first, size_t n, float* dst) const {
  if (received) {
    received->CopyOut(first * sizeof(float), n * sizeof(float), dst);
  } else {
    std::memcpy(dst, contiguous() + first, n * sizeof(float));
  }
}

}  // namespace tpuemu
