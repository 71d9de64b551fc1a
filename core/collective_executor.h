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
#include "core/collective_plan.h"
#include "core/host_network.h"
#include "core/job_abort.h"
#include "core/link_clock.h"
#include "core/transit_bytes.h"

namespace tpuemu {

// One span on the emulated clock, for traces: a chip's compute op,
// collective or wait, or a transfer on a directed link.
struct TraceEvent {
  std::string track;  // "chip 3" or "link 3->4 x+"
  std::string name;
  double start_s = 0;
  double end_s = 0;
  uint64_t bytes = 0;  // transfers
};

struct LinkUse {
  int src = 0;
  int dst = 0;
  Axis axis = Axis::kX;
  int dir = +1;
  uint64_t emu_bytes = 0;  // emulated bytes this collective put on the link
};

// Emulated clocks of a chip's outgoing links, by (axis, dir).
using LinkClocks = std::map<std::pair<int, int>, EmuLink>;

struct ChipRunResult {
  int chip = 0;
  double emulated_s = 0;  // when the chip's result was complete, emulated clock
  double wall_s = 0;      // wall time of the data movement (inputs and checks excluded)
  double host_lag_s = 0;  // paced runs: wall time beyond emulated_s * time_scale
  double compute_s = 0;   // emulated time of local compute ops (matmul and training jobs)
  uint64_t flops = 0;     // local compute ops (matmul jobs)
  uint64_t mismatches = 0;
  // Training jobs: the step, the chip's sum of squared errors, and its
  // exposed communication and sent bytes by mesh axis (data, fsdp, tensor,
  // pipeline).
  int step = 0;
  double loss_sum = 0;
  double mesh_comm_s[4] = {0, 0, 0, 0};  // exposed: the chip waited
  double mesh_busy_s[4] = {0, 0, 0, 0};  // the axis' transfers ran, hidden or not
  double compute_parts_s[3] = {0, 0, 0};  // forward matmuls, backward matmuls, the rest
  uint64_t mesh_bytes[4] = {0, 0, 0, 0};
  // Pipelined training: when the chip finished its microbatches, how long
  // of that it was not waiting for a neighbouring stage, and the most
  // activation bytes it held for backward passes at once.
  double pipeline_end_s = 0;
  double pipeline_busy_s = 0;
  uint64_t peak_activation_bytes = 0;
  std::vector<TraceEvent> trace;  // training jobs: the step's spans on the emulated clock
  std::vector<LinkUse> links;
};

struct RunOptions {
  uint64_t job = 0;
  // ORed into every chunk tag, so that several collectives of one job (the
  // steps of a matmul) never mistake each other's chunks.
  uint64_t tag_base = 0;
  // Round what crosses links to bf16 (training's wire_dtype: bf16): frames
  // carry rounded copies instead of lending the buffer.
  bool wire_bf16 = false;
  // When set, every transfer this chip books on a link is recorded here.
  std::vector<TraceEvent>* trace = nullptr;
  // The job's abort, which its compute checks (its receives are woken by the
  // mailbox's). Shared by the job's chips on this host.
  std::shared_ptr<JobAbort> abort = std::make_shared<JobAbort>();
  // A backstop only: a job whose peer is lost is aborted by the coordinator
  // (or by this host's failing chip) long before this.
  absl::Duration recv_timeout = absl::Seconds(120);
};

// x rounded to the nearest bfloat16 (ties to even), as a float.
float RoundToBf16(float x);

// One chunk onto a chip's outgoing link: books `ranges` of `buffer`
// (`dtype_bytes` emulated bytes per element) on the link's emulated clock
// from `ready` on (`links` holds the chip's link clocks), records the
// transfer in options.trace as `what`, and queues the frame, lent from the
// buffer (and from `transit` where it holds the ranges) or rounded to bf16
// for a bf16 wire. Returns the booking.
absl::StatusOr<EmuLink::Booking> SendChunk(HostNetwork& net, LinkClocks& links, const RunOptions& options, int chip,
                                           int peer, Axis axis, int dir, uint64_t tag,
                                           const std::shared_ptr<float[]>& buffer, const std::vector<Range>& ranges,
                                           int dtype_bytes, double ready, const std::string& what,
                                           const TransitBytes* transit = nullptr);

// One chip's run in three phases, so that a host can keep its chips in step:
// nobody's allocation or checking competes with another chip's data movement.
class ChipCollective {
 public:
  ChipCollective(const CollectivePlan& plan, int chip, HostNetwork& net, const RunOptions& options);
  ~ChipCollective();
  // Builds the program, allocates and fills the buffers (not timed).
  void Prepare();
  // Instead of Prepare: run on the caller's virtual buffer, which holds this
  // chip's input at plan.InputRanges(chip) from emulated time `start_s` on.
  // `links` carries each outgoing link's emulated clock from one collective
  // of a job to the next (and counts the bytes they all sent).
  void PrepareOn(std::shared_ptr<float[]> buffer, double start_s, LinkClocks* links);
  // Moves the data over the links on both clocks (timed).
  absl::Status Move();
  // Times, link bytes and link errors of the move (mismatches left at 0).
  absl::StatusOr<ChipRunResult> Report();
  // Elements of the result that differ from the reference.
  uint64_t CountMismatches();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tpuemu
