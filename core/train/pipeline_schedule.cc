#include "core/train/pipeline_schedule.h"

#include <algorithm>

namespace tpuemu {

std::vector<PipelineOp> StageSchedule(const std::string& schedule, int stages, int stage, int microbatches,
                                      int repeats) {
  std::vector<PipelineOp> ops;
  if (schedule == "1f1b") {
    const int ahead = std::min(stages - 1 - stage, microbatches);
    for (int m = 0; m < ahead; ++m) ops.push_back({true, m, 0});
    for (int m = ahead; m < microbatches; ++m) {
      ops.push_back({true, m, 0});
      ops.push_back({false, m - ahead, 0});
    }
    for (int m = microbatches - ahead; m < microbatches; ++m) ops.push_back({false, m, 0});
    return ops;
  }
  // gpipe is circular with one repeat.
  for (int r = 0; r < repeats; ++r) {
    for (int m = 0; m < microbatches; ++m) ops.push_back({true, m, r});
  }
  for (int r = repeats - 1; r >= 0; --r) {
    for (int m = 0; m < microbatches; ++m) ops.push_back({false, m, r});
  }
  return ops;
}

double BubbleFormula(int stages, int microbatches, int repeats) {
  return static_cast<double>(stages - 1) / (static_cast<double>(repeats) * microbatches + stages - 1);
}

double BubbleWithTransfers(int stages, int microbatches, int repeats, double compute_s, double hop_s) {
  const double m = static_cast<double>(repeats) * microbatches;
  const double span = (stages - 1) * (compute_s + 2 * hop_s) + m * std::max(compute_s, hop_s);
  return span > 0 ? 1 - m * compute_s / span : 0;
}

}  // namespace tpuemu
