#include "core/job/make_host_job.h"

#include "core/collective/host.h"
#include "core/matmul/host.h"
#include "core/train/host.h"

namespace tpuemu {

absl::StatusOr<std::unique_ptr<HostJob>> MakeHostJob(const JobSpec& spec, HostNetwork& net, const RunOptions& options) {
  if (const auto* c = std::get_if<CollectiveSpec>(&spec)) {
    auto plan = PlanCollectiveJob(net.topology(), *c);
    if (!plan.ok()) return plan.status();
    return std::unique_ptr<HostJob>(std::make_unique<HostCollective>(*std::move(plan), net, options));
  }
  if (const auto* t = std::get_if<TrainSpec>(&spec)) {
    auto job = PlanTrainJob(*t, net.topology(), net.time_scale());
    if (!job.ok()) return job.status();
    return std::unique_ptr<HostJob>(
        std::make_unique<HostTrainer>(job->config, job->mesh, net, options.job, options.abort));
  }
  auto program = MatmulProgram::Create(std::get<MatmulSpec>(spec), net.topology());
  if (!program.ok()) return program.status();
  return std::unique_ptr<HostJob>(std::make_unique<HostMatmul>(*std::move(program), net, options));
}

}  // namespace tpuemu
