// libFuzzer target: the peer frame decoder on arbitrary bytes, as another
// worker (or anybody who can reach a worker's port) may send them. Input:
// one byte that says where to cut the rest into gRPC slices (a message
// arrives in pieces), then the message. Anything may be refused with an
// error; nothing may crash, read out of bounds, allocate what a length
// merely declares, or leak. A frame that decodes must be readable whole.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "services/frame_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t cut_every = 1 + data[0] % 32;  // slices of 1-32 bytes, the last one shorter
  std::vector<grpc::Slice> slices;
  for (size_t at = 1; at < size; at += cut_every) {
    slices.emplace_back(data + at, std::min(cut_every, size - at));
  }
  grpc::ByteBuffer buffer(slices.data(), slices.size());
  auto frame = tpuemu::DecodeFrame(buffer);
  if (!frame.ok()) return 0;
  const size_t n = frame->elements();
  if (n * sizeof(float) > size) __builtin_trap();  // a payload is never bigger than the message
  std::vector<float> out(n);
  frame->CopyOut(0, n, out.data());
  return 0;
}
