// Runs one chip's part of a collective: moves real data over its links,
// advances the emulated clocks by what it actually sends, receives and
// reduces, and checks its result against the reference.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/collective/plan.h"
#include "core/wire/host_network.h"
#include "core/host/chip_result.h"
#include "core/host/run_options.h"
#include "core/wire/job_abort.h"
#include "core/wire/run_number.h"
#include "core/pod/link_clock.h"
#include "core/collective/transit_bytes.h"

namespace tpuemu {

// A received chunk is usable in this many slices, each once its last byte is
// in: a chip forwards the start of a chunk while its end is still arriving
// (cut-through), an eighth of a chunk behind.
inline constexpr uint64_t kCutThroughSlices = 8;

// Emulated clocks of a chip's outgoing links, by (axis, dir).
using LinkClocks = std::map<std::pair<int, int>, EmuLink>;

// x rounded to the nearest bfloat16 (ties to even), as a float.
float RoundToBf16(float x);

// The chip's outgoing link along axis/dir, which leads to `peer`; an
// internal error naming all three when the chip has none.
absl::StatusOr<LinkSender*> OutgoingLink(HostNetwork& net, int chip, Axis axis, int dir, int peer);

// A chunk's frame, booked on its link's emulated clock, not yet on the link.
struct BookedChunk {
  LinkSender* link = nullptr;
  Frame frame;
  EmuLink::Booking booking;
};

// One chunk for a chip's outgoing link: books `ranges` of `buffer`
// (`dtype_bytes` emulated bytes per element) on the link's emulated clock
// from `ready` on (`links` holds the chip's link clocks), records the
// transfer in options.trace as `what`, and makes the frame, lent from the
// buffer (and from `transit` where it holds the ranges) or rounded to bf16
// for a bf16 wire; with no buffer, a shape-only frame (no payload).
absl::StatusOr<BookedChunk> BookChunk(HostNetwork& net, LinkClocks& links, const RunOptions& options, int chip,
                                      int peer, Axis axis, int dir, uint64_t tag,
                                      const std::shared_ptr<float[]>& buffer, const std::vector<Range>& ranges,
                                      int dtype_bytes, double ready, const std::string& what,
                                      const TransitBytes* transit = nullptr);

// BookChunk, then onto the link (waiting while it is full). Returns the booking.
absl::StatusOr<EmuLink::Booking> SendChunk(HostNetwork& net, LinkClocks& links, const RunOptions& options, int chip,
                                           int peer, Axis axis, int dir, uint64_t tag,
                                           const std::shared_ptr<float[]>& buffer, const std::vector<Range>& ranges,
                                           int dtype_bytes, double ready, const std::string& what,
                                           const TransitBytes* transit = nullptr);

// A received frame holds `elements` (or, on a shape-only run, `values`
// false, that many elements' emulated bytes and no payload); an internal
// error naming both chips if not.
absl::Status CheckFrameSize(const Frame& frame, int chip, int peer, uint64_t elements, int dtype_bytes, bool values);

// One chip's run in three phases, so that a host can keep its chips in step:
// nobody's allocation or checking competes with another chip's data movement.
class ChipCollective {
 public:
  ChipCollective(const CollectivePlan& plan, int chip, HostNetwork& net, const RunOptions& options);
  ~ChipCollective();
  // Builds the program, allocates and fills the buffers (not timed).
  void Prepare();
  // Instead of Prepare: run on the caller's virtual buffer, which holds this
  // chip's input at plan.InputRanges(chip) from emulated time `start_s` on;
  // with no buffer (nullptr), shape-only: the same transfers and clocks, no
  // values moved or added.
  // `links` carries each outgoing link's emulated clock from one collective
  // of a job to the next (and counts the bytes they all sent).
  void PrepareOn(std::shared_ptr<float[]> buffer, double start_s, LinkClocks* links);
  // Moves the data over the links on both clocks, timed from a start line of
  // `start_rounds` rounds (StartBarrierRounds; none for 0), which the chip
  // leaves once the chips that send to it, directly or not, have reached it
  // too (core/collective/start_barrier.h). Once per ChipCollective.
  absl::Status Move(int start_rounds = 0);
  // Times, link bytes and link errors of the move (mismatches left at 0).
  absl::StatusOr<ChipRunResult> Report();
  // Elements of the result that differ from the reference.
  uint64_t CountMismatches();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tpuemu
