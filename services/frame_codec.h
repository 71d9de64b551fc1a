// Frames on the wire as tpuemu.v1.PeerChunk messages, encoded by hand so the
// tensor payload is handed to gRPC as its own slice (no copy on send) and
// copied once out of the received slices (no protobuf object in between).
#pragma once

#include "absl/status/statusor.h"
#include "core/wire/frame.h"
#include "grpcpp/support/byte_buffer.h"

namespace tpuemu {

// Sends a frame's lent segments or its own payload (a received frame is never
// re-sent whole: chips forward its bytes as lent segments of a new frame).
grpc::ByteBuffer EncodeFrame(Frame&& frame);
// Reads a frame from another worker, trusting none of its lengths: a length
// beyond the message's bytes, or a header longer than any header, is refused
// (DATA_LOSS) before anything is allocated for it.
absl::StatusOr<Frame> DecodeFrame(const grpc::ByteBuffer& buffer);

// A PeerChunkHeader is 8 scalar fields, under 80 bytes encoded.
inline constexpr size_t kMaxHeaderBytes = 256;

}  // namespace tpuemu
