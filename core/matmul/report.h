// A matmul's result across all chips, as users see it: the plan, what the
// links carried, flops, both clocks against the cost model, the error
// against a one-device product.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/host/job.h"
#include "core/matmul/plan.h"

namespace tpuemu {

struct MatmulReport {
  std::string expr;
  std::string mesh;                        // "X=x(2), Y=y(4)"
  int dtype_bytes = 2;
  std::vector<MatmulCandidate> candidates;  // [0] ran; the others were priced only
  std::string why;
  std::map<std::string, uint64_t> comm_bytes;  // emulated bytes a chip sent, by physical axis (busiest chip)
  uint64_t comm_bytes_total = 0;               // busiest chip, all axes
  uint64_t flops_per_chip = 0;                 // busiest chip
  double emulated_s = 0;   // slowest chip
  double compute_s = 0;    // of which compute, on that chip
  double comm_s = 0;       // the rest: communication (and waiting for it)
  double predicted_s = 0;  // the cost model's price of the plan
  double ratio = 0;        // emulated / predicted
  double wall_s = 0;
  double host_lag_s = 0;
  double max_rel_err = 0;  // max |C - reference| / max |reference| over all chips
  bool correct = false;
  std::vector<LinkUse> links;
};

MatmulReport SummarizeMatmul(const MatmulPlan& plan, const std::vector<ChipRunResult>& chips,
                             const std::vector<ChipCheck>& checks, int num_chips);

}  // namespace tpuemu
