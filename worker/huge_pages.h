// Transparent huge pages for the worker's tensors. Under the kernel's
// `madvise` setting (Debian's default) a process gets huge pages only where
// it asks; glibc's malloc asks for every large block when the tunable
// glibc.malloc.hugetlb=1 is set, which it reads once, at start-up. Fresh
// tensor buffers page-faulted 4 KiB at a time cost a third of an 8-chip DP
// job's time on our test machine (docs/benchmarks.md); with huge pages,
// 2 MiB at a time.
#pragma once

#include <string>

namespace tpuemu {

// First thing in main: when the kernel hands out huge pages on request and
// GLIBC_TUNABLES does not already say what malloc should do about them,
// starts this program again (same process, same arguments) with the
// tunable added. TPUEMU_HUGE_PAGES=0 keeps the process as it is. Returns
// only if it did not exec.
void ExecWithHugePageMalloc(char** argv);

// What malloc was told, for the log: "malloc: GLIBC_TUNABLES=...".
std::string HugePagesReport();

}  // namespace tpuemu
