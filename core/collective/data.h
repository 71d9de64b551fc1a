// Deterministic inputs of a collective and an independent reference.
//
// Chip with group rank m contributes f(m, j) = g(j) * w(m) + h(m) at element j
// of the virtual array, with small integers g, h in [-8, 8] and w in {1,2,3}
// drawn from (seed, j) and (seed, m). Sums over up to 2^16 chips stay exact in
// fp32, and the expected result of every element has a closed form that does
// not go through the transport, so each chip checks its own result cheaply.
#pragma once

#include <cstdint>

#include "core/collective/plan.h"

namespace tpuemu {

// Writes the chip's input at its InputRanges of the virtual buffer.
void FillCollectiveInput(const CollectivePlan& plan, int chip, float* virtual_buffer);

// Number of elements of the chip's result that differ from the reference.
uint64_t CountCollectiveMismatches(const CollectivePlan& plan, int chip, const float* virtual_buffer);

}  // namespace tpuemu
