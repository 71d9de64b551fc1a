// Each worker's resident memory over a job (v1::Job.worker_memory), as the
// CLI shows it: one line in `status`, `watch` and `submit --wait`, a column
// in `bench collective`, and an array in every --json.
#pragma once

#include <string>

#include "nlohmann/json.hpp"
#include "tpuemu/v1/services.grpc.pb.h"

namespace tpuemu {

// "worker memory: peak 2840 MiB (host 1; ...)"; empty when the job has none.
std::string WorkerMemoryLine(const v1::Job& job);
// "2840": the largest peak, MiB; "-" if none.
std::string WorkerMemoryCell(const v1::Job& job);
// [{"host", "before_bytes", "peak_bytes"}, ...]
nlohmann::json WorkerMemoryJson(const v1::Job& job);

}  // namespace tpuemu
