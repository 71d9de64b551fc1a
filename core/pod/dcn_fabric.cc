#include "core/pod/dcn_fabric.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace tpuemu {
namespace {

// How many of the job's hosts are on each slice it spans, for a job with DCN
// traffic (more than one slice); empty for one that has none.
std::map<int, int> HostsPerSlice(const Topology& pod, const Placement& placement) {
  std::map<int, int> hosts;
  for (int host : PlacedHosts(pod, placement)) ++hosts[pod.SliceOfHost(host)];
  if (hosts.size() < 2) hosts.clear();
  return hosts;
}

}  // namespace

std::optional<SlowLink> DcnFabric::ShareAt(const PlacedJob& job, const std::vector<PlacedJob>& running,
                                           int step) const {
  const std::map<int, int> mine = HostsPerSlice(pod_, job.placement);
  if (mine.empty() || oversubscription_ <= 1) return std::nullopt;
  std::vector<std::pair<std::string, std::map<int, int>>> others;
  for (const PlacedJob& other : running) {
    if (other.id != job.id) others.emplace_back(other.id, HostsPerSlice(pod_, other.placement));
  }
  // Each slice's uplink carries hosts_per_slice / R hosts' NICs; the job gets
  // that over the NICs asking, at most all of its own.
  const double uplink_hosts = pod_.hosts_per_slice() / oversubscription_;
  double share = 1;
  int tightest = -1;
  std::vector<std::string> sharing;
  for (const auto& [slice, hosts] : mine) {
    int asking = hosts;
    std::vector<std::string> here;
    for (const auto& [id, theirs] : others) {
      auto it = theirs.find(slice);
      if (it == theirs.end()) continue;
      asking += it->second;
      here.push_back(id);
    }
    if (uplink_hosts / asking < share) {
      share = uplink_hosts / asking;
      tightest = slice;
      sharing = here;
    }
  }
  if (tightest < 0) return std::nullopt;
  SlowLink link;
  link.axis = Axis::kDcn;
  link.bandwidth = share;
  link.when = {step, step + 1};
  link.cause = absl::StrCat("the DCN fabric of slice ", tightest, " (", absl::StrFormat("%g", oversubscription_),
                            ":1 oversubscribed)",
                            sharing.empty() ? "" : absl::StrCat(", shared with ", absl::StrJoin(sharing, ", ")));
  return link;
}

void AddDcnShare(Faults& faults, int step, const std::optional<SlowLink>& share) {
  if (!share) return;
  if (!faults.slow_links.empty()) {
    SlowLink& last = faults.slow_links.back();
    if (!last.cause.empty() && last.when.until_step == step && last.bandwidth == share->bandwidth &&
        last.cause == share->cause) {
      last.when.until_step = step + 1;
      return;
    }
  }
  faults.slow_links.push_back(*share);
}

absl::Status CheckDcnOversubscription(double oversubscription, const std::string& flag) {
  // At most a thousandth of the NICs, as a slow-link fault's least bandwidth:
  // infinity left DCN no bandwidth, and every time on it infinite.
  if (oversubscription >= 1 && oversubscription <= kMaxDcnOversubscription) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      flag, " ", oversubscription, ": must be from 1 to ", kMaxDcnOversubscription,
      " (1: the DCN fabric carries every host's NICs at once; R: a slice's hosts together get 1/R of their NICs' "
      "bandwidth into it, shared by the jobs there)"));
}

}  // namespace tpuemu
