// libFuzzer target: the job-file reader on arbitrary text, as a worker runs
// it on whatever a client submitted: parse, fill in the mesh, lay it on a
// pod and check memory. Anything may be refused with an error; nothing may
// crash, hang, overflow or leak.
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
  tpuemu::TrainSpec spec;
  spec.yaml.assign(reinterpret_cast<const char*>(data), size);
  spec.source = "fuzz.yaml";
  auto job = tpuemu::PlanTrainJob(spec, Pod(), 0);
  // A planned job has a stage per pipeline way and a positive batch.
  if (job.ok() && (job->config.stages() < 1 || job->config.global_batch_tokens <= 0)) __builtin_trap();
  return 0;
}
