// The DCN fabric jobs share (issue 16). Each host reaches the other slices
// through its own NICs (dcn_bw_per_host_dir, split evenly over its chips'
// DCN links), and a slice's hosts reach them through the data centre's
// fabric, which may carry less than all of them at once: oversubscribed R:1,
// a slice's uplink carries 1/R of its hosts' NICs, each direction. Every job
// with DCN traffic on a slice (every multislice job on it) shares that
// uplink; while their NICs together ask for more than it carries, each gets
// the same share of what it asks (proportional sharing of a saturated link,
// the fluid model of TCP flows through a bottleneck). A job that spans several
// slices is as fast as its most crowded slice lets it be.
//
// Jobs' emulated clocks are their own (each starts at 0), so their DCN bursts
// cannot be lined up transfer by transfer: the share is fixed per step, from
// the jobs running when the step is sent out, and charged exactly on the
// emulated clock as a slower DCN link (a SlowLink on the dcn axis for that
// step: core/pod/faults.h). At R = 1, the default, the fabric carries every
// NIC at full rate and no job ever waits for another.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/pod/faults.h"
#include "core/pod/placement.h"

namespace tpuemu {

// A job on the pod, as the fabric sees it.
struct PlacedJob {
  std::string id;
  Placement placement;
};

class DcnFabric {
 public:
  // `oversubscription` >= 1 (checked by CheckDcnOversubscription).
  DcnFabric(const Topology& pod, double oversubscription) : pod_(pod), oversubscription_(oversubscription) {}

  // The DCN share `job` gets at `step` while `running` (every job running
  // then, `job` among them or not) run too: a SlowLink on its dcn axis for
  // that step, saying why, or nothing when it gets all of its NICs.
  std::optional<SlowLink> ShareAt(const PlacedJob& job, const std::vector<PlacedJob>& running, int step) const;

 private:
  const Topology pod_;
  const double oversubscription_;
};

// Adds `share` (ShareAt's, for `step`) to `faults`: a step with the same
// share as the step before lengthens that one's window, so a long job under
// a steady share carries one entry, not one per step.
void AddDcnShare(Faults& faults, int step, const std::optional<SlowLink>& share);

// OK for a factor of at least 1; else an error naming `flag`.
inline constexpr double kMaxDcnOversubscription = 1000;
absl::Status CheckDcnOversubscription(double oversubscription, const std::string& flag);

}  // namespace tpuemu
