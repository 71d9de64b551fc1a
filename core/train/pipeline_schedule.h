// The order in which a pipeline stage runs its microbatches (seed 004,
// DESIGN §6). Layers are cut into stages x repeats equal groups; group
// v = r * stages + s lives on stage s (its r-th repeat), so a microbatch goes
// through stages 0..S-1 once per repeat, and its gradient comes back the
// same way reversed.
//   gpipe    : every forward, then every backward.
//   1f1b     : stage s runs S-1-s forwards ahead, then alternates one
//              forward with one backward, then drains: the bubble of gpipe,
//              with at most S-s microbatches' activations held.
//   circular : like gpipe over the repeats: forwards of repeat 0 for every
//              microbatch, then repeat 1, ...; backwards in reverse.
#pragma once

#include <string>
#include <vector>

namespace tpuemu {

struct PipelineOp {
  bool forward = true;
  int microbatch = 0;
  int repeat = 0;
  int group(int stages, int stage) const { return repeat * stages + stage; }
};

std::vector<PipelineOp> StageSchedule(const std::string& schedule, int stages, int stage, int microbatches,
                                      int repeats);

// The seeds' bubble: (S-1) / (repeats x M + S-1); gpipe and 1f1b have one repeat.
double BubbleFormula(int stages, int microbatches, int repeats);

// The same bubble when a stage hop is not free: a microbatch's forward and
// backward on one stage take `compute_s`, and its activations (and later its
// gradients) take `hop_s` to reach the next stage. Filling and draining the
// pipeline crosses S-1 hops each way, and in between a stage starts a
// microbatch no faster than its inputs arrive:
//   span = (S-1)(compute + 2 hop) + repeats M max(compute, hop),
//   bubble = 1 - repeats M compute / span,
// which is the seeds' formula when hop_s is 0.
double BubbleWithTransfers(int stages, int microbatches, int repeats, double compute_s, double hop_s);

}  // namespace tpuemu
