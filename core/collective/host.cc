#include "core/collective/host.h"

#include <set>

#include "core/collective/start_barrier.h"

namespace tpuemu {
namespace {

// Everything the plan sends this host's chips: the most of the job's data the
// host can ever hold at once.
uint64_t ReceivedBytes(const CollectivePlan& plan, const HostNetwork& net) {
  const std::set<int> local(net.local_chips().begin(), net.local_chips().end());
  uint64_t bytes = 0;
  for (const PlannedTransfer& t : plan.transfers()) {
    if (local.count(t.dst)) bytes += t.elements() * sizeof(float);
  }
  return bytes;
}

// The job's options with its faults (faults_, which outlives them).
RunOptions WithFaults(RunOptions options, const Faults* faults) {
  options.faults = faults;
  return options;
}

}  // namespace

HostCollective::HostCollective(CollectivePlan plan, HostNetwork& net, const RunOptions& options)
    : HostJob(net, options.job, ReceivedBytes(plan, net)),
      plan_(std::move(plan)),
      net_(net),
      faults_(plan_.spec().faults),
      options_(WithFaults(options, &faults_)) {}

absl::Status HostCollective::AddFaults(const Faults& added) {
  if (!added.stragglers.empty() || !added.down_links.empty() || !added.workers.empty()) {
    return absl::FailedPreconditionError("a collective takes its stragglers and down links when submitted");
  }
  faults_ = plan_.spec().faults.With(added);
  return absl::OkStatus();
}

absl::Status HostCollective::Prepare() {
  for (int chip : net_.local_chips()) chips_.push_back(std::make_unique<ChipCollective>(plan_, chip, net_, options_));
  OnThreads(chips_.size(), [&](size_t i) { chips_[i]->Prepare(); });
  // What this host's chips receive from other hosts arrives in buffers the
  // transport allocates, and with bf16 on the wire every chunk sent is a
  // rounded copy: fault that much heap in now, not while timed (a worker
  // gives its heap back after every job, so nothing is left from the last).
  const Topology& topo = net_.topology();
  const int host = topo.HostOf(net_.local_chips().front());
  uint64_t buffered_bytes = 0;
  for (const PlannedTransfer& t : plan_.transfers()) {
    const bool remote_in = topo.HostOf(t.dst) == host && topo.HostOf(t.src) != host;
    const bool copied_out = options_.wire_bf16 && topo.HostOf(t.src) == host;
    if (remote_in || copied_out) buffered_bytes += t.elements() * sizeof(float);
  }
  WarmHeap(buffered_bytes);
  start_barrier_rounds_ = StartBarrierRounds(plan_);
  prepared_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ChipRunResult>> HostCollective::Run(int) {
  if (!prepared_) {
    if (auto s = Prepare(); !s.ok()) return s;
  }
  return RunChips(
      net_, options_, chips_.size(),
      [&](size_t i) { return chips_[i]->Move(start_barrier_rounds_); },
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
