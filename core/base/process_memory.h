// This process's resident memory, as Linux counts it (/proc/self/status),
// and giving freed memory back to the system. A worker reports what each
// job took (its peak) and returns to its idle size once it has no job
// (worker/idle_release.h); the coordinator, once it drops finished jobs.
#pragma once

#include <cstdint>

namespace tpuemu {

// VmRSS: resident now. 0 where /proc is not readable.
uint64_t ResidentBytes();
// VmHWM: the most resident since the process started or since
// ResetPeakResident (for the whole process, every thread).
uint64_t PeakResidentBytes();
// Starts VmHWM again from the resident size now (/proc/self/clear_refs);
// false where the kernel does not allow it (then PeakResidentBytes keeps
// the process's peak).
bool ResetPeakResident();
// Hands freed heap back to the system (malloc_trim): glibc keeps freed
// blocks for reuse, and with the data path's malloc settings (no trimming
// below 512 MiB, a single arena) a worker would stay at its largest job's
// size for good.
void ReleaseFreedMemory();

}  // namespace tpuemu
