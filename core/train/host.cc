#include "core/train/host.h"

#include <algorithm>

#include "core/tensor/blis_kernel.h"
#include "core/pod/host_memory.h"
#include "core/host/job.h"

namespace tpuemu {

HostTrainer::HostTrainer(const TrainConfig& config, const TrainMesh& mesh, HostNetwork& net, uint64_t job,
                         std::shared_ptr<JobAbort> abort)
    : HostJob(net, job, kPodHostBytes), config_(config), mesh_(mesh), net_(net) {
  options_.job = job;
  options_.abort = std::move(abort);
}

std::vector<ChipCheck> HostTrainer::Check() {
  std::vector<ChipCheck> checks(chips_.size());
  OnThreads(chips_.size(), [&](size_t i) {
    checks[i].chip = net_.local_chips()[i];
    checks[i].param_squares = chips_[i]->ParamSquares();
  });
  return checks;
}

void HostTrainer::Prepare() {
  if (!chips_.empty()) return;
  EnsureBlisKernel();  // here, not in the first timed multiply (it forks and self-tests)
  for (int chip : net_.local_chips()) {
    chips_.push_back(std::make_unique<ChipTrainer>(config_, mesh_, chip, net_, options_.job, options_.abort));
  }
  // The teacher is the same on every chip that makes targets: made once here.
  std::shared_ptr<const ModelWeights> teacher;
  if (std::any_of(chips_.begin(), chips_.end(), [](const auto& c) { return c->last_stage(); })) {
    teacher = std::make_shared<const ModelWeights>(InitWeights(config_, WeightStream::kTeacher));
  }
  OnThreads(chips_.size(), [&](size_t i) { chips_[i]->Prepare(teacher); });
}

absl::StatusOr<std::vector<ChipRunResult>> HostTrainer::Run(int step) {
  std::vector<absl::StatusOr<ChipRunResult>> results(chips_.size(), absl::UnknownError("not run"));
  return RunChips(
      net_, options_, chips_.size(),
      [&](size_t i) {
        results[i] = chips_[i]->Step(step);
        return results[i].status();
      },
      [&](size_t i) { return results[i]; });
}

}  // namespace tpuemu
