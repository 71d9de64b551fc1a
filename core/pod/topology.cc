#include "core/pod/topology.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/field.h"

namespace tpuemu {
namespace {

absl::Status Invalid(const std::string& field, const std::string& value, const std::string& allowed) {
  return absl::InvalidArgumentError(absl::StrCat(field, " '", value, "': ", allowed));
}

// Hosts own contiguous blocks: fill the block along x first, then y, then z,
// taking at each axis the largest size that divides both the axis and what is
// left of chips_per_host. Documented in docs/topology.md.
absl::StatusOr<std::array<int, 3>> HostBlock(const std::array<int, 3>& dims, int chips_per_host,
                                             const std::string& shape) {
  std::array<int, 3> block = {1, 1, 1};
  int left = chips_per_host;
  for (int a = 0; a < 3; ++a) {
    for (int d = dims[a]; d >= 1; --d) {
      if (dims[a] % d == 0 && left % d == 0) {
        block[a] = d;
        left /= d;
        break;
      }
    }
  }
  if (left != 1) {
    return Invalid(Field("chips_per_host"), std::to_string(chips_per_host),
                   absl::StrCat("does not tile the slice ", shape,
                                " into contiguous host blocks; use a divisor of the slice such as 1, 2 or 4"));
  }
  return block;
}

}  // namespace

std::string AxisName(Axis axis) {
  switch (axis) {
    case Axis::kX: return "x";
    case Axis::kY: return "y";
    case Axis::kZ: return "z";
    case Axis::kDcn: return "dcn";
  }
  return "?";
}

absl::StatusOr<Axis> ParseAxis(const std::string& name) {
  if (name == "x") return Axis::kX;
  if (name == "y") return Axis::kY;
  if (name == "z") return Axis::kZ;
  if (name == "dcn") return Axis::kDcn;
  return Invalid("axis", name, "unknown axis; allowed: x, y, z, dcn");
}

absl::StatusOr<Topology> Topology::Create(const TopologyRequest& req) {
  Topology t;
  t.request_ = req;
  std::vector<std::string> parts = absl::StrSplit(req.topology, absl::MaxSplits(':', 1));
  if (parts.size() != 2 || parts[0].empty() || parts[1].empty()) {
    return Invalid(Field("topology"), req.topology, "expected CHIP:SHAPE such as v5e:4x4 or v5p:4x4x4");
  }
  absl::StatusOr<ChipProfile> profile = PresetProfile(parts[0]);
  if (!profile.ok() && LooksLikeProfileFile(parts[0])) {
    profile = LoadProfileFile(parts[0]);  // its errors name the file
  } else if (!profile.ok()) {
    return Invalid(Field("topology"), req.topology, std::string(profile.status().message()));
  }
  if (!profile.ok()) return profile.status();
  t.profile_ = *profile;

  std::vector<std::string> dims = absl::StrSplit(parts[1], 'x');
  if (dims.empty() || dims.size() > static_cast<size_t>(t.profile_.max_torus_dims)) {
    return Invalid(Field("topology"), req.topology,
                   absl::StrCat(t.profile_.name, " slices have 1 to ", t.profile_.max_torus_dims,
                                " dimensions, like 4x4", t.profile_.max_torus_dims == 3 ? "x4" : ""));
  }
  t.num_dims_ = static_cast<int>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    int d = 0;
    if (!absl::SimpleAtoi(dims[i], &d) || d < 1 || d > 64) {
      return Invalid(Field("topology"), req.topology,
                     absl::StrCat("dimension '", dims[i], "' must be a whole number from 1 to 64"));
    }
    t.dims_[i] = d;
  }
  if (req.slices < 1 || req.slices > kMaxSlices) {
    return Invalid(Field("slices"), std::to_string(req.slices), absl::StrCat("must be 1 to ", kMaxSlices));
  }
  t.slices_ = req.slices;
  if (req.chips_per_host < 1 || t.chips_per_slice() % req.chips_per_host != 0) {
    return Invalid(Field("chips_per_host"), std::to_string(req.chips_per_host),
                   absl::StrCat("must divide the ", t.chips_per_slice(), " chips of slice ", parts[1]));
  }
  t.chips_per_host_ = req.chips_per_host;
  auto block = HostBlock(t.dims_, req.chips_per_host, parts[1]);
  if (!block.ok()) return block.status();
  t.host_block_ = *block;

  if (req.wraparound == "auto" || req.wraparound.empty()) {
    for (int a = 0; a < t.num_dims_; ++a) t.wrap_[a] = t.profile_.AxisWraps(t.dims_[a]);
  } else if (req.wraparound != "none") {
    for (const auto& name : absl::StrSplit(req.wraparound, ',')) {
      auto axis = ParseAxis(std::string(name));
      if (!axis.ok() || *axis == Axis::kDcn || static_cast<int>(*axis) >= t.num_dims_) {
        return Invalid(Field("wraparound"), req.wraparound,
                       absl::StrCat("allowed: auto, none, or a list of the slice's axes (",
                                    t.num_dims_ == 1 ? "x" : t.num_dims_ == 2 ? "x,y" : "x,y,z", ")"));
      }
      if (t.wrap_[static_cast<int>(*axis)]) {
        return Invalid(Field("wraparound"), req.wraparound,
                       absl::StrCat("names ", name, " twice; list each axis once"));
      }
      t.wrap_[static_cast<int>(*axis)] = true;
    }
  }
  return t;
}

std::string Topology::ShapeString() const {
  std::vector<int> d(dims_.begin(), dims_.begin() + num_dims_);
  return absl::StrJoin(d, "x");
}

std::string Topology::Describe() const {
  std::vector<std::string> wraps;
  for (int a = 0; a < num_dims_; ++a) {
    if (wrap_[a]) wraps.push_back(AxisName(static_cast<Axis>(a)));
  }
  return absl::StrCat(profile_.name, ":", ShapeString(), ", ", slices_, " slice(s), ", num_hosts(),
                      " host(s) of ", chips_per_host_, " chip(s), wraparound: ",
                      wraps.empty() ? "none" : absl::StrJoin(wraps, ","));
}

int Topology::AxisSize(Axis a) const {
  return a == Axis::kDcn ? slices_ : dims_[static_cast<int>(a)];
}

bool Topology::HasAxis(Axis a) const {
  return a == Axis::kDcn ? slices_ > 1 : static_cast<int>(a) < num_dims_;
}

bool Topology::AxisWraps(Axis a) const {
  // Slices form a ring over DCN when there are at least 3 of them.
  return a == Axis::kDcn ? slices_ >= 3 : wrap_[static_cast<int>(a)];
}

LinkParams Topology::Link(Axis a) const {
  if (a == Axis::kDcn) {
    // A host's DCN bandwidth is shared evenly by its chips: every chip owns a
    // fixed share so that link clocks stay per-chip and deterministic.
    return {profile_.dcn_bw_per_host_dir / chips_per_host_, profile_.dcn_latency};
  }
  return {profile_.ici_bw_dir * profile_.ici_link_efficiency, profile_.ici_hop_latency};
}

int Topology::ChipId(const Coord& c) const {
  return ((c.slice * dims_[2] + c.xyz[2]) * dims_[1] + c.xyz[1]) * dims_[0] + c.xyz[0];
}

Coord Topology::CoordOf(int chip) const {
  Coord c;
  c.xyz[0] = chip % dims_[0];
  chip /= dims_[0];
  c.xyz[1] = chip % dims_[1];
  chip /= dims_[1];
  c.xyz[2] = chip % dims_[2];
  c.slice = chip / dims_[2];
  return c;
}

int Topology::HostOf(int chip) const {
  Coord c = CoordOf(chip);
  std::array<int, 3> blocks;
  for (int a = 0; a < 3; ++a) blocks[a] = dims_[a] / host_block_[a];
  int bx = c.xyz[0] / host_block_[0], by = c.xyz[1] / host_block_[1], bz = c.xyz[2] / host_block_[2];
  return c.slice * hosts_per_slice() + (bz * blocks[1] + by) * blocks[0] + bx;
}

std::vector<int> Topology::ChipsOfHost(int host) const {
  std::vector<int> chips;
  for (int chip = 0; chip < num_chips(); ++chip) {
    if (HostOf(chip) == host) chips.push_back(chip);
  }
  return chips;
}

std::optional<int> Topology::Neighbor(int chip, Axis axis, int dir) const {
  int n = AxisSize(axis);
  if (n < 2) return std::nullopt;
  Coord c = CoordOf(chip);
  int v = c.Get(axis) + dir;
  if (v < 0 || v >= n) {
    if (!AxisWraps(axis)) return std::nullopt;
    v = (v + n) % n;
  }
  c.Set(axis, v);
  return ChipId(c);
}

std::vector<Topology::OutgoingLink> Topology::OutgoingLinks(int chip) const {
  std::vector<OutgoingLink> links;
  for (Axis axis : {Axis::kX, Axis::kY, Axis::kZ, Axis::kDcn}) {
    for (int dir : {+1, -1}) {
      if (auto peer = Neighbor(chip, axis, dir)) links.push_back({axis, dir, *peer});
    }
  }
  return links;
}

}  // namespace tpuemu
