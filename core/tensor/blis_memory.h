// Giving back what BLIS keeps between multiplies. BLIS packs operands into
// blocks from pools of its own, which grow with the threads that multiply
// at once and never shrink: after an 8-chip training job a worker kept 72 MB
// of them (11 MB resident). Releasing them ends the library's state
// (bli_finalize); its next call starts it again with the same kernels.
#pragma once

namespace tpuemu {

// Only while no thread of the process multiplies (no job is on this host,
// core/host/job.h LiveHostJobs()).
void ReleaseBlisMemory();

}  // namespace tpuemu
