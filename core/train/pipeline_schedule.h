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

}  // namespace tpuemu
