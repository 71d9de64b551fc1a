#include "core/host_collective.h"

namespace tpuemu {

HostCollective::HostCollective(CollectivePlan plan, HostNetwork& net, const RunOptions& options)
    : plan_(std::move(plan)), net_(net), options_(options) {}

void HostCollective::Prepare() {
  for (int chip : net_.local_chips()) chips_.push_back(std::make_unique<ChipCollective>(plan_, chip, net_, options_));
  OnThreads(chips_.size(), [&](size_t i) { chips_[i]->Prepare(); });
  prepared_ = true;
}

absl::StatusOr<std::vector<ChipRunResult>> HostCollective::Run(int) {
  if (!prepared_) Prepare();
  return RunChips(
      net_, options_.job, chips_.size(), [&](size_t i) { return chips_[i]->Move(); },
      [&](size_t i) { return chips_[i]->Report(); });
}

std::vector<ChipCheck> HostCollective::Check() {
  std::vector<ChipCheck> checks(chips_.size());
  OnThreads(chips_.size(), [&](size_t i) {
    checks[i].chip = net_.local_chips()[i];
    checks[i].mismatches = chips_[i]->CountMismatches();
  });
  return checks;
}

}  // namespace tpuemu
