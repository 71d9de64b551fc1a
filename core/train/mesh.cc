#include "core/train/mesh.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tpuemu {

std::string MeshAxisName(MeshAxisKind kind) {
  switch (kind) {
    case MeshAxisKind::kData: return "data";
    case MeshAxisKind::kFsdp: return "fsdp";
    case MeshAxisKind::kTensor: return "tensor";
    case MeshAxisKind::kPipeline: return "pipeline";
  }
  return "?";
}

absl::StatusOr<TrainMesh> TrainMesh::Create(const TrainConfig& c, const Topology& topo) {
  TrainMesh mesh;
  mesh.topo_ = topo;
  // DCN: one physical axis, so at most one logical axis may cross slices.
  const int dcn[kMeshAxes] = {c.dcn.data, c.dcn.fsdp, c.dcn.tensor, c.dcn.pipeline};
  int crossing = 0;
  for (int k = 0; k < kMeshAxes; ++k) {
    if (dcn[k] > 1) {
      mesh.axes_[k].push_back(Axis::kDcn);
      ++crossing;
    }
  }
  if (crossing > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        c.name, ": dcn_data_parallelism=", c.dcn.data, ", dcn_fsdp_parallelism=", c.dcn.fsdp,
        ", dcn_tensor_parallelism=", c.dcn.tensor, ", dcn_pipeline_parallelism=", c.dcn.pipeline,
        ": the slices form one DCN ring, so only one of them may be above 1"));
  }
  // ICI: hand the physical axes longer than 1 to data, fsdp, tensor and
  // pipeline so that the products match, pipeline on at most one axis; the
  // first assignment in (x, y, z) x (data, fsdp, tensor, pipeline) order wins.
  std::vector<Axis> physical;
  for (Axis a : {Axis::kX, Axis::kY, Axis::kZ}) {
    if (topo.AxisSize(a) > 1) physical.push_back(a);
  }
  const int want[kMeshAxes] = {c.ici.data, c.ici.fsdp, c.ici.tensor, c.ici.pipeline};
  const int n = static_cast<int>(physical.size());
  int total = 1;
  for (int i = 0; i < n; ++i) total *= kMeshAxes;
  for (int code = 0; code < total; ++code) {
    int product[kMeshAxes] = {1, 1, 1, 1};
    int pipeline_axes = 0;
    std::vector<int> owner(n);
    for (int i = 0, rest = code; i < n; ++i, rest /= kMeshAxes) {
      owner[i] = rest % kMeshAxes;
      product[owner[i]] *= topo.AxisSize(physical[i]);
      if (owner[i] == static_cast<int>(MeshAxisKind::kPipeline)) ++pipeline_axes;
    }
    if (!std::equal(product, product + kMeshAxes, want) || pipeline_axes > 1) continue;
    for (int i = 0; i < n; ++i) mesh.axes_[owner[i]].push_back(physical[i]);
    return mesh.CheckPipeline(c);
  }
  std::vector<std::string> sizes;
  for (Axis a : physical) sizes.push_back(absl::StrCat(AxisName(a), "=", topo.AxisSize(a)));
  return absl::InvalidArgumentError(absl::StrCat(
      c.name, ": ici_data_parallelism=", c.ici.data, ", ici_fsdp_parallelism=", c.ici.fsdp,
      ", ici_tensor_parallelism=", c.ici.tensor, ", ici_pipeline_parallelism=", c.ici.pipeline,
      " cannot be laid on whole physical axes of ", topo.ShapeString(), " (", absl::StrJoin(sizes, ", "),
      "); each must be a product of some of them, and the pipeline the size of one of them"));
}

absl::StatusOr<TrainMesh> TrainMesh::CheckPipeline(const TrainConfig& c) const {
  // The circular schedule sends from the last stage back to the first: one
  // hop only if the pipeline axis wraps around (or has two stages).
  if (c.pipeline_schedule != "circular" || stages() <= 2) return *this;
  const Axis axis = axes(MeshAxisKind::kPipeline)[0];
  if (topo_.AxisWraps(axis)) return *this;
  return absl::InvalidArgumentError(absl::StrCat(
      c.name, ": pipeline_schedule: circular sends from the last of the ", stages(), " stages back to the first, but ",
      axis == Axis::kDcn ? "2 slices do not form a DCN ring" : absl::StrCat("axis ", AxisName(axis), " of ",
                                                                             topo_.ShapeString(), " has no wraparound"),
      "; use gpipe or 1f1b, or a pipeline axis with wraparound"));
}

StageLink TrainMesh::StageNeighbor(int chip, int delta) const {
  const int n = stages();
  const Axis axis = axes(MeshAxisKind::kPipeline)[0];
  Coord coord = topo_.CoordOf(chip);
  const int from = coord.Get(axis);
  coord.Set(axis, ((from + delta) % n + n) % n);
  const int peer = topo_.ChipId(coord);
  // Forward on the axis' + links, unless that way has no link to the peer
  // (the last stage of a line, or two stages without wraparound).
  const int toward = delta > 0 ? +1 : -1;
  return {peer, axis, topo_.Neighbor(chip, axis, toward) == peer ? toward : -toward};
}

int TrainMesh::size(MeshAxisKind kind) const {
  int s = 1;
  for (Axis a : axes(kind)) s *= topo_.AxisSize(a);
  return s;
}

int TrainMesh::Index(int chip, MeshAxisKind kind) const {
  const Coord coord = topo_.CoordOf(chip);
  int index = 0;
  for (Axis a : axes(kind)) index = index * topo_.AxisSize(a) + coord.Get(a);
  return index;
}

int TrainMesh::BatchIndex(int chip) const {
  return Index(chip, MeshAxisKind::kData) * size(MeshAxisKind::kFsdp) + Index(chip, MeshAxisKind::kFsdp);
}

std::string TrainMesh::Describe() const {
  std::vector<std::string> parts;
  for (MeshAxisKind k : kAllMeshAxes) {
    std::vector<std::string> names;
    for (Axis a : axes(k)) names.push_back(AxisName(a));
    parts.push_back(absl::StrCat(MeshAxisName(k), "=", names.empty() ? "-" : absl::StrJoin(names, ","), "(",
                                 size(k), ")"));
  }
  return absl::StrJoin(parts, " ");
}

}  // namespace tpuemu
