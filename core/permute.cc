#include "core/permute.h"

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
  LinkSender* sender = net.Link(chip, axis, dir);
  if (sender == nullptr) {
    return absl::InternalError(absl::StrCat("chip ", chip, " has no ", AxisName(axis), dir > 0 ? "+" : "-",
                                            " link to chip ", peer));
  }
  auto [it, _] = links.try_emplace({static_cast<int>(axis), dir}, net.topology().Link(axis));
  const int64_t chunks = Chunks(t);
  double arrival = ready;
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t first = c * kChunkElements;
    const int64_t n = std::min(kChunkElements, t.elements() - first);
    const double bytes = static_cast<double>(n) * dtype_bytes;
    const EmuLink::Booking booking = it->second.Book(bytes, ready);
    arrival = booking.arrival;
    if (options.trace != nullptr) {
      options.trace->push_back({absl::StrCat("link ", chip, "->", peer, " ", AxisName(axis), dir > 0 ? "+" : "-"),
                                absl::StrCat("permute to chip ", peer), booking.start, booking.end,
                                static_cast<uint64_t>(bytes)});
    }
    Frame frame;
    frame.header = {options.job, chip, peer, tag | static_cast<uint64_t>(c), booking.arrival,
                    static_cast<uint64_t>(bytes), 0, 0};
    if (options.wire_bf16) {
      frame.payload.resize(n);
      for (int64_t i = 0; i < n; ++i) frame.payload[i] = RoundToBf16(t.data[first + i]);
    } else {
      frame.lent.push_back({t.data.get() + first, static_cast<size_t>(n)});
      frame.lender = t.data;
    }
    sender->Enqueue(std::move(frame));
  }
  return arrival;
}

absl::StatusOr<double> PermuteReceive(HostNetwork& net, const RunOptions& options, int chip, int peer, uint64_t tag,
                                      LocalTensor& t) {
  const int64_t chunks = Chunks(t);
  double arrival = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t first = c * kChunkElements;
    const int64_t n = std::min(kChunkElements, t.elements() - first);
    auto frame = net.mailbox().Take(options.job, chip, peer, tag | static_cast<uint64_t>(c), options.recv_timeout);
    if (!frame.ok()) return frame.status();
    if (static_cast<int64_t>(frame->elements()) != n) {
      return absl::InternalError(absl::StrCat("chip ", chip, " expected ", n, " elements from chip ", peer,
                                              ", got ", frame->elements()));
    }
    frame->CopyOut(0, n, t.data.get() + first);
    arrival = std::max(arrival, frame->header.emu_arrival);
  }
  return arrival;
}

}  // namespace tpuemu
