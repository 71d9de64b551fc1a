#include "core/host_trainer.h"

#include "core/host_job.h"

namespace tpuemu {

HostTrainer::HostTrainer(const TrainConfig& config, const TrainMesh& mesh, HostNetwork& net, uint64_t job)
    : config_(config), mesh_(mesh), net_(net), job_(job) {}

void HostTrainer::Prepare() {
  for (int chip : net_.local_chips()) {
    chips_.push_back(std::make_unique<ChipTrainer>(config_, mesh_, chip, net_, job_));
  }
  OnThreads(chips_.size(), [&](size_t i) { chips_[i]->Prepare(); });
}

absl::StatusOr<std::vector<ChipStepResult>> HostTrainer::Step(int step) {
  std::vector<absl::StatusOr<ChipStepResult>> results(chips_.size(), absl::UnknownError("not run"));
  OnThreads(chips_.size(), [&](size_t i) {
    results[i] = chips_[i]->Step(step);
    if (!results[i].ok()) net_.mailbox().AbortJob(job_, results[i].status());
  });
  net_.ForgetJob(job_);
  std::vector<ChipStepResult> out;
  for (auto& r : results) {
    if (!r.ok()) return r.status();
    out.push_back(*std::move(r));
  }
  return out;
}

}  // namespace tpuemu
