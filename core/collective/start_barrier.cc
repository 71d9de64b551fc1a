#include "core/collective/start_barrier.h"

namespace tpuemu {

int StartBarrierRounds(const CollectivePlan& plan) {
  // The plan's links along its axes make a torus (or a product of lines):
  // its longest shortest path is the sum of each axis's. A host holds only
  // its own chips' transfers (CollectivePlan::CreateFor), so this counts from
  // the axes, which every host sees whole.
  int rounds = 0;
  for (const AxisPlan& a : plan.axes()) {
    const bool both_ways = a.algorithm == RingAlgorithm::kBiRing && a.way == 0;
    rounds += both_ways ? a.size / 2 : a.size - 1;
  }
  return rounds;
}

}  // namespace tpuemu
