#include "core/train/pod_part.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tpuemu {
namespace {

absl::Status KeyError(const TrainConfig& c, const std::string& key, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(c.name, ": ", key, ": ", what));
}

std::string ChipOf(const std::string& topology) { return topology.substr(0, topology.rfind(':')); }

// The block `topology` names, as x, y, z sizes (1 beyond the shape's dims).
absl::StatusOr<std::array<int, 3>> BlockOf(const TrainConfig& c, const Topology& pod) {
  const std::string pod_chip = ChipOf(pod.request().topology);
  const size_t colon = c.topology.rfind(':');
  if (colon == std::string::npos || ChipOf(c.topology) != pod_chip) {
    return KeyError(c, "topology",
                    absl::StrCat(c.topology, ": the pod is ", pod.request().topology, "; name its chip and a slice ",
                                 "shape or a block of it, like ", pod_chip, ":", pod.ShapeString()));
  }
  const std::vector<std::string> sizes = absl::StrSplit(c.topology.substr(colon + 1), 'x');
  std::array<int, 3> block = {1, 1, 1};
  if (sizes.size() > static_cast<size_t>(pod.num_dims())) {
    return KeyError(c, "topology", absl::StrCat(c.topology, ": the pod's slices have ", pod.num_dims(),
                                                " dimension(s) (", pod.ShapeString(), ")"));
  }
  for (size_t a = 0; a < sizes.size(); ++a) {
    if (!absl::SimpleAtoi(sizes[a], &block[a]) || block[a] < 1) {
      return KeyError(c, "topology", absl::StrCat(c.topology, ": '", sizes[a], "' is not a positive whole number"));
    }
  }
  return block;
}

// The first block of whole hosts with `chips` chips, widest along x first.
std::optional<std::array<int, 3>> BlockOfChips(const Topology& pod, int chips) {
  const std::array<int, 3> dims = {pod.AxisSize(Axis::kX), pod.AxisSize(Axis::kY), pod.AxisSize(Axis::kZ)};
  const std::array<int, 3>& step = pod.host_block();
  for (int x = dims[0] / step[0] * step[0]; x >= step[0]; x -= step[0]) {
    for (int y = dims[1] / step[1] * step[1]; y >= step[1]; y -= step[1]) {
      for (int z = dims[2] / step[2] * step[2]; z >= step[2]; z -= step[2]) {
        if (x * y * z != chips) continue;
        if (PlacedTopology(pod, PodPart{1, {x, y, z}}).ok()) return std::array<int, 3>{x, y, z};
      }
    }
  }
  return std::nullopt;
}

}  // namespace

absl::StatusOr<PodPart> TrainPodPart(const TrainConfig& c, const Topology& pod) {
  const std::array<int, 3> whole = {pod.AxisSize(Axis::kX), pod.AxisSize(Axis::kY), pod.AxisSize(Axis::kZ)};
  if (c.num_slices < 0 || c.num_slices > pod.slices()) {
    return KeyError(c, "num_slices", absl::StrCat(c.num_slices, ", but the pod has ", pod.slices(),
                                                  " slice(s); a job runs on at most all of them"));
  }
  std::array<int, 3> block = whole;
  const bool named_block = !c.topology.empty() && c.topology != pod.request().topology;
  if (named_block) {
    auto named = BlockOf(c, pod);
    if (!named.ok()) return named.status();
    block = *named;
  }
  int slices = c.num_slices == 0 ? pod.slices() : c.num_slices;
  if (c.num_chips > pod.num_chips()) {
    return KeyError(c, "num_chips", absl::StrCat(c.num_chips, ", but the pod has ", pod.num_chips(), " chips"));
  }
  if (c.num_chips > 0) {
    if (c.num_slices == 0 && !named_block) slices = (c.num_chips + pod.chips_per_slice() - 1) / pod.chips_per_slice();
    const int per_slice = c.num_chips / slices;
    if (c.num_chips % slices != 0 || per_slice > pod.chips_per_slice()) {
      return KeyError(c, "num_chips", absl::StrCat(c.num_chips, " does not split evenly over ", slices, " slice(s) of ",
                                                   pod.chips_per_slice(), " chips"));
    }
    if (named_block) {
      if (block[0] * block[1] * block[2] != per_slice) {
        return KeyError(c, "num_chips", absl::StrCat(c.num_chips, ", but topology ", c.topology, " on ", slices,
                                                     " slice(s) has ", block[0] * block[1] * block[2] * slices,
                                                     " chips; give one of the two"));
      }
    } else if (auto fits = BlockOfChips(pod, per_slice)) {
      block = *fits;
    } else {
      return KeyError(c, "num_chips",
                      absl::StrCat(c.num_chips, ": no block of whole hosts (", pod.chips_per_host(), " chips each) in a ",
                                   pod.ShapeString(), " slice has ", per_slice,
                                   " chips; use a count that a block of hosts makes, or name one with topology"));
    }
  }
  PodPart part;
  part.num_slices = slices == pod.slices() ? 0 : slices;
  if (block != whole) part.block = block;
  if (auto placed = PlacedTopology(pod, part); !placed.ok()) {
    return KeyError(c, named_block ? "topology" : "num_chips",
                    absl::StrCat(named_block ? c.topology : std::to_string(c.num_chips), ": ", placed.status().message()));
  }
  return part;
}

}  // namespace tpuemu
