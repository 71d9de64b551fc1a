#include "core/frame.h"

#include <malloc.h>

namespace tpuemu {

void KeepChunkBuffersInHeap() {
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

}  // namespace tpuemu
