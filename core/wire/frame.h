// A chunk of tensor data on its way over one directed link.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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

// Sets up a process that moves bulk data: chunk-sized buffers come from one
// heap instead of fresh mmaps or per-thread arenas, which page-fault on every
// chunk, and absl::Mutex (under gRPC's locks) skips its deadlock detection,
// on in Debian's build, which takes a global lock on every acquisition. Call
// once at start-up, before any thread starts.
void PrepareProcessForDataPath();

// Faults in free heap for `bytes` of receives (three times that, at most
// 192 MiB, in receive-sized blocks), so that the buffers a
// transport allocates next (gRPC's receive slices) land on pages already
// mapped, instead of faulting in page by page while data arrives: the same
// preparation a job gives its chips' own receive ranges, outside the timed
// part. A benchmark's receive buffers (MPI's, say) are touched beforehand too.
void WarmHeap(size_t bytes);

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
  // A job placed on part of the pod (core/pod/placement.h) names its chips by
  // its own ids; its links set the pod's here (-1: the same), which is what
  // fabrics route by. Mailboxes key frames by the job's own ids, so the pod's
  // never cross the wire.
  int32_t pod_src = -1;
  int32_t pod_dst = -1;

  int pod_src_chip() const { return pod_src < 0 ? src_chip : pod_src; }
  int pod_dst_chip() const { return pod_dst < 0 ? dst_chip : pod_dst; }
};

// Bytes somebody else owns, lent in place: `keep` holds them alive.
struct Segment {
  const std::byte* data;
  size_t bytes;
  std::shared_ptr<const void> keep;
};

// Received bytes that a transport holds (e.g. gRPC slices), read in place.
class TransportBytes {
 public:
  virtual ~TransportBytes() = default;
  virtual size_t size() const = 0;  // bytes
  // Calls fn on the contiguous pieces that hold bytes [offset, offset + n).
  virtual void ForEachPiece(size_t offset, size_t n,
                            const std::function<void(const std::byte*, size_t)>& fn) const = 0;
};

// A frame's elements live in exactly one place: its own `payload`; byte
// segments `lent` by their owners (a sender's buffer, which the sender never
// rewrites before the receiver has used it, or an earlier frame's received
// bytes that a chip forwards untouched); or bytes a transport received
// (`received`). Lending and reading in place spare a copy on each side of
// every hop, and forwarding a lent piece spares the copies in between.
struct Frame {
  FrameHeader header;
  Payload payload;
  std::vector<Segment> lent;
  std::unique_ptr<TransportBytes> received;
  // A degraded link (core/pod/faults.h), for the sender's wall pacing only
  // (never on the wire): the fraction of the link's bandwidth it gets and
  // the latency it adds, in emulated seconds.
  double pace_bandwidth = 1;
  double pace_extra_latency_s = 0;

  size_t elements() const;
  // Contiguous aligned floats, or nullptr when only CopyOut can read them.
  const float* contiguous() const;
  void CopyOut(size_t first, size_t n, float* dst) const;
  // Appends elements [first, first + n) to `out` as segments, without a copy.
  // `self` is this frame, owned by the caller: it keeps payload and received
  // bytes alive; lent segments keep their own owners.
  void Lend(size_t first, size_t n, const std::shared_ptr<const Frame>& self, std::vector<Segment>* out) const;
};

}  // namespace tpuemu
