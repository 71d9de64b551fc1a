#include "core/collective/kind.h"

#include <map>
#include <mutex>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "core/base/field.h"
#include "core/collective/host.h"
#include "core/collective/plan.h"
#include "core/collective/report.h"
#include "core/pod/dcn_fabric.h"

namespace tpuemu {
namespace {

class PlannedCollective : public PlannedJob {
 public:
  PlannedCollective(CollectivePlan plan, const Topology& topo, PodPart part)
      : plan_(std::move(plan)), topo_(topo), part_(part) {}

  PodPart part() const override { return part_; }

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
    CollectiveReport report = tpuemu::Summarize(plan_, topo_, chips);
    for (std::string& shared : AddedFaults().ActiveAt(0)) report.faults.push_back(std::move(shared));
    return report;
  }

  Faults AddedFaults() const override {
    std::lock_guard<std::mutex> lock(shared_mu_);
    return shared_;
  }

  void ShareDcn(int step, const std::optional<SlowLink>& share) const override {
    std::lock_guard<std::mutex> lock(shared_mu_);
    AddDcnShare(shared_, step, share);
  }

 private:
  const CollectivePlan plan_;
  const Topology topo_;  // the job's own: the pod's, or the slices it runs on
  const PodPart part_;
  mutable std::mutex shared_mu_;
  mutable Faults shared_;  // the shared DCN fabric's slowdown (one step: the only one)
};

class CollectiveKind : public JobKind {
 public:
  std::string name() const override { return CollectiveSpec::kKind; }

  absl::StatusOr<std::unique_ptr<PlannedJob>> Plan(const JobSpec& spec, const Topology& topo,
                                                   double) const override {
    const CollectiveSpec& collective = *spec.get<CollectiveSpec>();
    // num_slices fewer than the pod's: planned on those slices alone (a pod of its own).
    if (collective.num_slices < 0 || collective.num_slices > topo.slices()) {
      return absl::InvalidArgumentError(absl::StrCat(Field("num_slices"), " ", collective.num_slices, ": the pod has ",
                                                     topo.slices(), " slice(s); give 1 to ", topo.slices(),
                                                     ", or 0 for all of them"));
    }
    const PodPart part{collective.num_slices == topo.slices() ? 0 : collective.num_slices, {0, 0, 0}};
    auto placed = part == PodPart{} ? absl::StatusOr<Topology>(topo) : PlacedTopology(topo, part);
    if (!placed.ok()) return placed.status();
    // Planned on its slices alone, a DCN axis would be missing from the pod it
    // plans on, and the pod's own advice (more slices) would be wrong.
    if (part != PodPart{} && placed->slices() == 1 && absl::c_linear_search(collective.axes, Axis::kDcn)) {
      return absl::InvalidArgumentError(absl::StrCat(Field("num_slices"), " ", collective.num_slices,
                                                     ": one slice has no axis dcn; give ", Field("num_slices"),
                                                     " 2 or more (up to the pod's ", topo.slices(),
                                                     "), or 0 for all of them"));
    }
    auto plan = PlanCollectiveJob(*placed, collective);
    if (!plan.ok()) return plan.status();
    return std::make_unique<PlannedCollective>(*std::move(plan), *placed, part);
  }
};

}  // namespace

std::unique_ptr<JobKind> MakeCollectiveKind() { return std::make_unique<CollectiveKind>(); }

}  // namespace tpuemu
