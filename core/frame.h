// A chunk of tensor data on its way over one directed link.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace tpuemu {

// Leaves elements uninitialised on resize: payloads are always overwritten,
// and zero-filling a megabyte per chunk costs as much as copying it.
template <typename T>
struct DefaultInitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

using Payload = std::vector<float, DefaultInitAllocator<float>>;

// Serves chunk-sized buffers from the heap instead of fresh mmaps, which
// would page-fault on every chunk. Call once at start-up.
void KeepChunkBuffersInHeap();

struct FrameHeader {
  uint64_t job = 0;
  int32_t src_chip = 0;
  int32_t dst_chip = 0;
  uint64_t tag = 0;
  double emu_arrival = 0;   // emulated time the data is usable at the receiver
  uint64_t emu_bytes = 0;   // bytes charged on the emulated clock (emulated dtype)
  // Paced links, on the sender's steady clock: when the frame left the
  // sender and when it is due at the receiver (the end of its transmission
  // plus the hop latency). 0 when unpaced.
  int64_t sent_at_ns = 0;
  int64_t due_at_ns = 0;
};

struct Frame {
  FrameHeader header;
  Payload payload;
};

}  // namespace tpuemu
