// How a frame that has left its link reaches its destination chip: through
// memory for chips on this host, over the wire for chips on another.
#pragma once

#include <functional>
#include <future>

#include "absl/status/status.h"
#include "core/wire/frame.h"

namespace tpuemu {

class Fabric {
 public:
  using SentFn = std::function<void(absl::Status)>;

  virtual ~Fabric() = default;
  // Hands a frame to the destination chip's mailbox, or to the wire towards
  // it, and returns once it has left this host (a wire may make it wait).
  virtual absl::Status Deliver(Frame&& frame) = 0;
  // The same without waiting: `sent` is called, in whatever thread, maybe
  // this one, once the frame has left this host or could not. Never blocks.
  // A fabric whose Deliver never blocks (memory) keeps this default.
  virtual void Send(Frame&& frame, SentFn sent) { sent(Deliver(std::move(frame))); }

 protected:
  // Deliver for a fabric whose Send is its own (a wire): sends and waits
  // until the frame has left.
  absl::Status SendAndWait(Frame&& frame) {
    std::promise<absl::Status> left;
    Send(std::move(frame), [&left](absl::Status status) { left.set_value(std::move(status)); });
    return left.get_future().get();
  }
};

}  // namespace tpuemu
