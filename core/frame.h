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

// Serves chunk-sized buffers from one heap instead of fresh mmaps or
// per-thread arenas, which page-fault on every chunk. Call once at start-up,
// before any thread starts.
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

// Received bytes that a transport holds (e.g. gRPC slices), read in place.
class TransportBytes {
 public:
  virtual ~TransportBytes() = default;
  virtual size_t size() const = 0;  // bytes
  virtual void CopyOut(size_t offset, size_t n, void* dst) const = 0;
  // The bytes as aligned floats if they are contiguous, else nullptr.
  virtual const float* contiguous() const = 0;
};

struct Segment {
  const float* data;
  size_t elements;
};

// A frame's elements live in exactly one place: its own `payload`; ranges
// `lent` from the sender's buffer, kept alive by `lender` (the sender never
// rewrites a range it has sent before the receiver has used it); or bytes a
// transport received (`received`). Lending and reading in place spare a copy
// on each side of every hop.
struct Frame {
  FrameHeader header;
  Payload payload;
  std::vector<Segment> lent;
  std::shared_ptr<const void> lender;
  std::unique_ptr<TransportBytes> received;

  size_t elements() const;
  // Contiguous aligned floats, or nullptr when only CopyOut can read them.
  const float* contiguous() const;
  void CopyOut(size_t first, size_t n, float* dst) const;
};

}  // namespace tpuemu
