#include "core/job/symmetric_pod.h"

#include "absl/strings/str_cat.h"
#include "core/job/kinds.h"

namespace tpuemu {
namespace {

// The chip that stands for all: any would do.
constexpr int kStandIn = 0;

}  // namespace

absl::Status CheckOneChipStandsForAll(const TrainSpec& spec, const Topology& topo) {
  TrainConfig c = spec.config;
  auto no = [&](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat(c.name, ": its chips are not all alike: ", why));
  };
  if (!c.shape_only()) return no("it computes values (values: real), which differ from chip to chip");
  if (!c.faults.empty()) return no("it has faults on purpose, which single out chips and links");
  for (Axis a : {Axis::kX, Axis::kY, Axis::kZ, Axis::kDcn}) {
    if (topo.AxisSize(a) > 1 && !topo.AxisWraps(a)) {
      return no(absl::StrCat("axis ", AxisName(a), " (", topo.AxisSize(a), a == Axis::kDcn ? " slices" : " chips",
                             ") does not wrap around, so the chips at its ends have one link fewer"));
    }
  }
  if (auto s = ResolveMesh(c, topo); !s.ok()) return s;  // also refuses a job on part of the pod
  if (c.stages() > 1) return no(absl::StrCat(c.stages(), " pipeline stages, each with its own part of the schedule"));
  return absl::OkStatus();
}

SymmetricPod::SymmetricPod(const Topology& topo) : topo_(topo) {
  PrepareProcessForDataPath();
  for (const Topology::OutgoingLink& link : topo.OutgoingLinks(kStandIn)) {
    mirror_[link.peer] = *topo.Neighbor(kStandIn, link.axis, -link.dir);  // every axis wraps
  }
  net_ = std::make_unique<HostNetwork>(topo, std::vector<int>{kStandIn}, 0, this);
}

absl::Status SymmetricPod::Deliver(Frame&& frame) {
  // What the stand-in sent to its neighbour, its other neighbour sent to it.
  auto it = mirror_.find(frame.header.dst_chip);
  if (frame.header.src_chip != kStandIn || it == mirror_.end()) {
    return absl::InternalError(absl::StrCat("chip ", frame.header.src_chip, " sent to chip ", frame.header.dst_chip,
                                            ", which is not one link from the chip that stands for all"));
  }
  frame.header.src_chip = it->second;
  frame.header.dst_chip = kStandIn;
  net_->mailbox().Put(std::move(frame));
  return absl::OkStatus();
}

absl::StatusOr<JobRun> SymmetricPod::Run(const TrainSpec& spec, const StepCallback& on_step) {
  if (auto s = CheckOneChipStandsForAll(spec, topo_); !s.ok()) return s;
  auto planned = PlanJob(JobSpec(spec), topo_, 0);
  if (!planned.ok()) return planned.status();
  return RunPlannedJob(**planned, *net_, /*job=*/1, on_step);
}

}  // namespace tpuemu
