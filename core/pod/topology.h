// A pod: one or more slices, each a 1D/2D/3D torus of chips, hosts owning
// contiguous blocks of chips, slices joined by DCN.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/pod/profile.h"

namespace tpuemu {

enum class Axis { kX = 0, kY = 1, kZ = 2, kDcn = 3 };
constexpr int kNumAxes = 4;

std::string AxisName(Axis axis);
absl::StatusOr<Axis> ParseAxis(const std::string& name);

struct Coord {
  int slice = 0;
  std::array<int, 3> xyz = {0, 0, 0};
  int Get(Axis a) const { return a == Axis::kDcn ? slice : xyz[static_cast<int>(a)]; }
  void Set(Axis a, int v) {
    if (a == Axis::kDcn) slice = v; else xyz[static_cast<int>(a)] = v;
  }
};

// Bandwidth (one direction) and latency of the links along one axis.
struct LinkParams {
  double bw_dir = 0;
  double latency = 0;
};

// What the user asks for; ParseTopology validates it into a Topology.
// The most slices a pod joins over DCN.
inline constexpr int kMaxSlices = 64;

struct TopologyRequest {
  std::string topology;        // "CHIP:SHAPE", e.g. "v5e:4x4"; CHIP may be a profile file path
  int slices = 1;
  int chips_per_host = 4;
  std::string wraparound = "auto";  // "auto", "none", or axes that wrap: "x,y"
};

class Topology {
 public:
  static absl::StatusOr<Topology> Create(const TopologyRequest& request);

  const ChipProfile& profile() const { return profile_; }
  const TopologyRequest& request() const { return request_; }
  std::string ShapeString() const;   // "4x4"
  std::string Describe() const;      // "v5e:4x4 x 2 slices, 4 chips/host"

  int num_dims() const { return num_dims_; }
  int slices() const { return slices_; }
  int chips_per_host() const { return chips_per_host_; }
  int chips_per_slice() const { return dims_[0] * dims_[1] * dims_[2]; }
  int num_chips() const { return chips_per_slice() * slices_; }
  int hosts_per_slice() const { return chips_per_slice() / chips_per_host_; }
  int num_hosts() const { return hosts_per_slice() * slices_; }
  // The block of chips each host holds (x, y, z; 1 beyond num_dims).
  const std::array<int, 3>& host_block() const { return host_block_; }

  // Size of an axis (x/y/z beyond num_dims are size 1; dcn is the slice count).
  int AxisSize(Axis a) const;
  bool HasAxis(Axis a) const;
  bool AxisWraps(Axis a) const;
  LinkParams Link(Axis a) const;

  int ChipId(const Coord& c) const;
  Coord CoordOf(int chip) const;
  int HostOf(int chip) const;
  int SliceOfHost(int host) const { return host / hosts_per_slice(); }
  std::vector<int> ChipsOfHost(int host) const;
  // The chip one step along `axis` in direction dir (+1/-1), if the link exists.
  std::optional<int> Neighbor(int chip, Axis axis, int dir) const;

  struct OutgoingLink {
    Axis axis;
    int dir;
    int peer;
  };
  // Every directed link that leaves a chip (ICI and DCN).
  std::vector<OutgoingLink> OutgoingLinks(int chip) const;

 private:
  ChipProfile profile_;
  TopologyRequest request_;
  int num_dims_ = 1;
  std::array<int, 3> dims_ = {1, 1, 1};
  std::array<bool, 3> wrap_ = {false, false, false};
  std::array<int, 3> host_block_ = {1, 1, 1};
  int slices_ = 1;
  int chips_per_host_ = 1;
};

}  // namespace tpuemu
