#include "core/train/permute.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tpuemu {
namespace {

// 1 MiB of floats: the data path's chunk, well under gRPC's message limit.
constexpr int64_t kChunkElements = int64_t{1} << 18;

int64_t Chunks(const LocalTensor& t) { return std::max<int64_t>(1, (t.elements() + kChunkElements - 1) / kChunkElements); }

}  // namespace

absl::StatusOr<double> PermuteSend(HostNetwork& net, LinkClocks& links, const RunOptions& options, int chip,
                                   int peer, Axis axis, int dir, uint64_t tag, const LocalTensor& t, int dtype_bytes,
                                   double ready) {
  double arrival = ready;
  for (int64_t c = 0; c < Chunks(t); ++c) {
    const int64_t first = c * kChunkElements;
    const Range range{static_cast<uint64_t>(first), static_cast<uint64_t>(std::min(kChunkElements, t.elements() - first))};
    auto booking = SendChunk(net, links, options, chip, peer, axis, dir, tag | static_cast<uint64_t>(c), t.data, {range},
                             dtype_bytes, ready, absl::StrCat("permute to chip ", peer));
    if (!booking.ok()) return booking.status();
    arrival = booking->arrival;
  }
  return arrival;
}

absl::StatusOr<double> PermuteReceive(HostNetwork& net, const RunOptions& options, int chip, int peer, uint64_t tag,
                                      LocalTensor& t, int dtype_bytes) {
  const int64_t chunks = Chunks(t);
  double arrival = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t first = c * kChunkElements;
    const int64_t n = std::min(kChunkElements, t.elements() - first);
    auto frame = net.mailbox().Take(options.job, chip, peer, tag | static_cast<uint64_t>(c), options.recv_timeout);
    if (!frame.ok()) return frame.status();
    if (auto s = CheckFrameSize(*frame, chip, peer, n, dtype_bytes, t.has_values()); !s.ok()) return s;
    if (t.has_values()) frame->CopyOut(0, n, t.data.get() + first);
    arrival = std::max(arrival, frame->header.emu_arrival);
  }
  return arrival;
}

}  // namespace tpuemu
