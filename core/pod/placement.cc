#include "core/pod/placement.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tpuemu {
namespace {

std::array<int, 3> SliceDims(const Topology& pod) {
  return {pod.AxisSize(Axis::kX), pod.AxisSize(Axis::kY), pod.AxisSize(Axis::kZ)};
}

// "4x2" over the pod's dimensions (a 2-D pod's blocks have no z).
std::string ShapeOf(const std::array<int, 3>& dims, int num_dims, const char* separator = "x") {
  return absl::StrJoin(dims.begin(), dims.begin() + num_dims, separator);
}

// The sizes a block may take: whole hosts, at most the slice, e.g. "4x1, 4x2, 4x4".
std::string AllowedBlocks(const Topology& pod) {
  const std::array<int, 3> dims = SliceDims(pod), host = pod.host_block();
  std::vector<std::string> sizes;
  std::array<int, 3> b = host;
  // The host's block, then doubling along each axis while it fits.
  sizes.push_back(ShapeOf(b, pod.num_dims()));
  for (int a = pod.num_dims() - 1; a >= 0; --a) {
    while (b[a] * 2 <= dims[a] && dims[a] % (b[a] * 2) == 0) {
      b[a] *= 2;
      sizes.push_back(ShapeOf(b, pod.num_dims()));
    }
  }
  return absl::StrJoin(sizes, ", ");
}

}  // namespace

absl::StatusOr<Topology> PlacedTopology(const Topology& pod, const PodPart& part) {
  const int slices = part.num_slices == 0 ? pod.slices() : part.num_slices;
  if (slices < 1 || slices > pod.slices()) {
    return absl::InvalidArgumentError(absl::StrCat("num_slices: ", part.num_slices, ", but the pod has ",
                                                   pod.slices(), " slice(s): from 1 to ", pod.slices()));
  }
  TopologyRequest request = pod.request();
  request.slices = slices;
  if (part.whole_slices()) return Topology::Create(request);

  const std::array<int, 3> dims = SliceDims(pod), host = pod.host_block();
  const std::string shape = ShapeOf(part.block, pod.num_dims());
  const std::string why = absl::StrCat("a block of the pod's ", pod.ShapeString(), " slices must fit in one and hold ",
                                       "whole hosts; each host holds a ", ShapeOf(host, pod.num_dims()),
                                       " block of chips here, so blocks such as ", AllowedBlocks(pod), " fit");
  for (int a = 0; a < 3; ++a) {
    if (part.block[a] < 1 || part.block[a] > dims[a] || part.block[a] % host[a] != 0) {
      return absl::InvalidArgumentError(absl::StrCat("a ", shape, " block: ", why));
    }
  }
  std::vector<std::string> wraps;
  for (int a = 0; a < pod.num_dims(); ++a) {
    const Axis axis = static_cast<Axis>(a);
    if (part.block[a] == dims[a] && pod.AxisWraps(axis)) wraps.push_back(AxisName(axis));
  }
  // A profile file's chip is named by its path, which the pod's request keeps.
  request.topology = absl::StrCat(pod.request().topology.substr(0, pod.request().topology.rfind(':')), ":", shape);
  request.wraparound = wraps.empty() ? "none" : absl::StrJoin(wraps, ",");
  auto placed = Topology::Create(request);
  if (!placed.ok()) return placed.status();
  // Hosts fill their block x first (docs/topology.md): a block of whole
  // hosts may still cut them differently (a 4x2 block of a 6x4 slice).
  if (placed->host_block() != host) return absl::InvalidArgumentError(absl::StrCat("a ", shape, " block: ", why));
  return placed;
}

std::vector<Placement> CandidatePlacements(const Topology& pod, const PodPart& part) {
  const int slices = part.num_slices == 0 ? pod.slices() : part.num_slices;
  if (part.whole_slices() && slices >= pod.slices()) return {Placement{}};
  std::vector<Placement> out;
  const std::array<int, 3> dims = SliceDims(pod), step = pod.host_block();
  const std::array<int, 3> block = part.whole_slices() ? dims : part.block;
  for (int first = 0; first + slices <= pod.slices(); ++first) {
    for (int z = 0; z + block[2] <= dims[2]; z += step[2]) {
      for (int y = 0; y + block[1] <= dims[1]; y += step[1]) {
        for (int x = 0; x + block[0] <= dims[0]; x += step[0]) {
          out.push_back(Placement{first, slices, {x, y, z}, part.block});
        }
      }
    }
  }
  return out;
}

std::vector<int> PlacedChips(const Topology& pod, const Placement& placement) {
  std::vector<int> chips;
  if (placement.whole_pod()) {
    for (int c = 0; c < pod.num_chips(); ++c) chips.push_back(c);
    return chips;
  }
  const std::array<int, 3> dims = placement.whole_slices() ? SliceDims(pod) : placement.block;
  // In the job's own chip order (Topology::ChipId: x fastest, slice slowest).
  for (int s = 0; s < placement.num_slices; ++s) {
    for (int z = 0; z < dims[2]; ++z) {
      for (int y = 0; y < dims[1]; ++y) {
        for (int x = 0; x < dims[0]; ++x) {
          Coord c;
          c.slice = placement.first_slice + s;
          c.xyz = {placement.origin[0] + x, placement.origin[1] + y, placement.origin[2] + z};
          chips.push_back(pod.ChipId(c));
        }
      }
    }
  }
  return chips;
}

std::vector<int> PlacedHosts(const Topology& pod, const Placement& placement) {
  // A job's hosts are numbered as their first chips come (x fastest, then
  // y, z, slice), and so are the pod's: the pod's hosts of the job's chips,
  // in the job's chip order, once each.
  std::vector<int> hosts;
  for (int chip : PlacedChips(pod, placement)) {
    const int host = pod.HostOf(chip);
    if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
  }
  return hosts;
}

std::string DescribePlacement(const Placement& placement) {
  if (placement.whole_pod()) return "the whole pod";
  const std::string slices =
      placement.num_slices == 1
          ? absl::StrCat("slice ", placement.first_slice)
          : absl::StrCat("slices ", placement.first_slice, "-", placement.first_slice + placement.num_slices - 1);
  if (placement.whole_slices()) return slices;
  const int dims = placement.block[2] > 1 || placement.origin[2] > 0 ? 3 : 2;
  return absl::StrCat("the ", ShapeOf(placement.block, dims), " block at (", ShapeOf(placement.origin, dims, ","),
                      ") of ", slices);
}

}  // namespace tpuemu
