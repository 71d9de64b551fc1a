// libFuzzer target: the job-file reader on arbitrary text, as the CLI reads a
// file, then what the coordinator and every worker do with the typed spec:
// check it, fill in the mesh, lay it on a pod and check memory. Anything may
// be refused with an error; nothing may crash, hang, overflow or leak.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/train/job.h"

namespace {

const tpuemu::Topology& Pod() {
  static const tpuemu::Topology topo = *tpuemu::Topology::Create({"v5p:2x4", 2, 2, "auto"});
  return topo;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto spec = tpuemu::ParseTrainSpec(std::string(reinterpret_cast<const char*>(data), size), "fuzz.yaml");
  if (!spec.ok()) return 0;
  auto job = tpuemu::PlanTrainJob(*spec, Pod(), 0);
  // A planned job has a stage per pipeline way and a positive batch.
  if (job.ok() && (job->config.stages() < 1 || job->config.global_batch_tokens <= 0)) __builtin_trap();
  return 0;
}
