#include "core/collective/kind.h"

#include <map>

#include "core/collective/host.h"
#include "core/collective/plan.h"
#include "core/collective/report.h"

namespace tpuemu {
namespace {

class PlannedCollective : public PlannedJob {
 public:
  PlannedCollective(CollectivePlan plan, const Topology& topo) : plan_(std::move(plan)), topo_(topo) {}

  absl::StatusOr<std::unique_ptr<HostJob>> MakeHostJob(HostNetwork& net, const RunOptions& options) const override {
    // The host's chips' share only: the whole pod's transfers on every host
    // would cost hosts x transfers.
    auto mine = CollectivePlan::CreateFor(topo_, plan_.spec(), net.local_chips());
    if (!mine.ok()) return mine.status();
    return std::make_unique<HostCollective>(*std::move(mine), net, options);
  }

  JobReport Summarize(const std::vector<ChipRunResult>& last_step,
                      const std::vector<ChipCheck>& checks) const override {
    std::map<int, uint64_t> mismatches;
    for (const ChipCheck& c : checks) mismatches[c.chip] = c.mismatches;
    std::vector<ChipRunResult> chips = last_step;
    for (ChipRunResult& c : chips) c.mismatches = mismatches[c.chip];
    return tpuemu::Summarize(plan_, topo_, chips);
  }

 private:
  const CollectivePlan plan_;
  const Topology topo_;
};

class CollectiveKind : public JobKind {
 public:
  std::string name() const override { return CollectiveSpec::kKind; }

  absl::StatusOr<std::unique_ptr<PlannedJob>> Plan(const JobSpec& spec, const Topology& topo,
                                                   double) const override {
    auto plan = PlanCollectiveJob(topo, *spec.get<CollectiveSpec>());
    if (!plan.ok()) return plan.status();
    return std::make_unique<PlannedCollective>(*std::move(plan), topo);
  }
};

}  // namespace

std::unique_ptr<JobKind> MakeCollectiveKind() { return std::make_unique<CollectiveKind>(); }

}  // namespace tpuemu
