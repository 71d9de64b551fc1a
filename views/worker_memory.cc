#include "views/worker_memory.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tpuemu {
namespace {

std::string MiB(uint64_t bytes) { return absl::StrFormat("%.0f MiB", bytes / 1048576.0); }

}  // namespace

std::string WorkerMemoryLine(const v1::Job& job) {
  if (job.worker_memory().empty()) return "";
  const v1::HostMemory* peak = &job.worker_memory(0);
  uint64_t before = 0;
  double mean = 0;
  for (const v1::HostMemory& m : job.worker_memory()) {
    if (m.peak_bytes() > peak->peak_bytes()) peak = &m;
    before = std::max<uint64_t>(before, m.before_bytes());
    mean += m.peak_bytes();
  }
  mean /= job.worker_memory_size();
  return absl::StrCat("worker memory: peak ", MiB(peak->peak_bytes()), " (host ", peak->host(), "; mean ",
                      MiB(static_cast<uint64_t>(mean)), " over ", job.worker_memory_size(),
                      " workers; before it ", MiB(before), " at most; given back once idle for --keep-memory-for)");
}

std::string WorkerMemoryCell(const v1::Job& job) {
  if (job.worker_memory().empty()) return "-";
  uint64_t peak = 0;
  for (const v1::HostMemory& m : job.worker_memory()) peak = std::max<uint64_t>(peak, m.peak_bytes());
  return absl::StrFormat("%.0f", peak / 1048576.0);
}

nlohmann::json WorkerMemoryJson(const v1::Job& job) {
  nlohmann::json out = nlohmann::json::array();
  for (const v1::HostMemory& m : job.worker_memory()) {
    out.push_back({{"host", m.host()},
                   {"before_bytes", m.before_bytes()},
                   {"peak_bytes", m.peak_bytes()}});
  }
  return out;
}

}  // namespace tpuemu
