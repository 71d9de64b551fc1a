#include "core/base/process_memory.h"

#include <malloc.h>

#include <fstream>
#include <string>

namespace tpuemu {
namespace {

// A "Name:   123 kB" line of /proc/self/status, in bytes.
uint64_t StatusBytes(const std::string& name) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.compare(0, name.size() + 1, name + ":") == 0) return std::stoull(line.substr(name.size() + 1)) * 1024;
  }
  return 0;
}

}  // namespace

uint64_t ResidentBytes() { return StatusBytes("VmRSS"); }
uint64_t PeakResidentBytes() { return StatusBytes("VmHWM"); }

bool ResetPeakResident() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";  // resets the peak resident size (Linux 4.0 and later)
  clear.flush();
  return clear.good();
}

void ReleaseFreedMemory() { malloc_trim(0); }

}  // namespace tpuemu
