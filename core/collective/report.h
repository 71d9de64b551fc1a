// One collective's result across all chips, as users see it (DESIGN §4).
#pragma once

#include <string>
#include <vector>

#include "core/collective/executor.h"
#include "core/collective/plan.h"

namespace tpuemu {

struct CollectiveReport {
  std::string op;
  std::string axes;
  std::string algorithm;
  int n = 0;
  uint64_t bytes = 0;        // V, emulated bytes of the full array
  int dtype_bytes = 2;
  double emulated_s = 0;     // slowest chip, emulated clock
  double predicted_s = 0;    // closed form of the algorithm run (oracle.h)
  double ratio = 0;          // emulated / predicted
  double seed_formula_s = 0; // the seed's rule of thumb for the same case (0: the seeds give none)
  double seed_ratio = 0;     // emulated / seed_formula
  double wall_s = 0;         // slowest chip, wall clock
  double algbw_gbps = 0;     // host array bytes / wall_s (AllToAll: one chip's buffer, as nccl-tests)
  double busbw_gbps = 0;     // algbw x the nccl-tests factor
  double emulated_algbw_gbps = 0;  // V / emulated_s
  double emulated_busbw_gbps = 0;
  double host_lag_s = 0;     // paced runs: worst chip
  bool correct = false;
  uint64_t mismatches = 0;
  // The faults in force, in words; predicted_s and seed_formula_s are for
  // healthy links, so `ratio` shows what the faults cost.
  std::vector<std::string> faults;
  std::vector<LinkUse> links;  // every directed link that carried data
};

// nccl-tests bus bandwidth factor: 2(n-1)/n for AllReduce, (n-1)/n otherwise.
double BusFactor(CollectiveOp op, int n);

CollectiveReport Summarize(const CollectivePlan& plan, const Topology& topo,
                           const std::vector<ChipRunResult>& chips);

}  // namespace tpuemu
