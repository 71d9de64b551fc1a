#include "core/matmul/host.h"

#include "core/tensor/blis_kernel.h"
#include "core/pod/host_memory.h"

namespace tpuemu {

HostMatmul::HostMatmul(std::shared_ptr<const MatmulProgram> program, HostNetwork& net, const RunOptions& options)
    : HostJob(net, options.job, kPodHostBytes), program_(std::move(program)), net_(net), options_(options) {}

absl::Status HostMatmul::Prepare() {
  if (!chips_.empty()) return absl::OkStatus();
  EnsureBlisKernel();  // here, not in the first timed multiply (it forks and self-tests)
  for (int chip : net_.local_chips()) chips_.push_back(std::make_unique<ChipMatmul>(program_, chip, net_, options_));
  OnThreads(chips_.size(), [&](size_t i) { chips_[i]->Prepare(); });
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ChipRunResult>> HostMatmul::Run(int) {
  if (auto s = Prepare(); !s.ok()) return s;
  std::vector<absl::StatusOr<ChipRunResult>> results(chips_.size(), absl::UnknownError("not run"));
  return RunChips(
      net_, options_, chips_.size(),
      [&](size_t i) {
        results[i] = chips_[i]->Run();
        return results[i].status();
      },
      [&](size_t i) { return results[i]; });
}

std::vector<ChipCheck> HostMatmul::Check() {
  std::vector<ChipCheck> checks(chips_.size());
  OnThreads(chips_.size(), [&](size_t i) {
    const MatmulCheck c = chips_[i]->Check();
    checks[i].chip = net_.local_chips()[i];
    checks[i].max_abs_err = c.max_abs_err;
    checks[i].max_abs_ref = c.max_abs_ref;
  });
  return checks;
}

}  // namespace tpuemu
