#include "core/train_mesh.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tpuemu {

std::string MeshAxisName(MeshAxisKind kind) {
  switch (kind) {
    case MeshAxisKind::kData: return "data";
    case MeshAxisKind::kFsdp: return "fsdp";
    case MeshAxisKind::kTensor: return "tensor";
  }
  return "?";
}

absl::StatusOr<TrainMesh> TrainMesh::Create(const TrainConfig& c, const Topology& topo) {
  TrainMesh mesh;
  mesh.topo_ = topo;
  // DCN: one physical axis, so at most one logical axis may cross slices.
  const int dcn[3] = {c.dcn.data, c.dcn.fsdp, c.dcn.tensor};
  int crossing = 0;
  for (int k = 0; k < 3; ++k) {
    if (dcn[k] > 1) {
      mesh.axes_[k].push_back(Axis::kDcn);
      ++crossing;
    }
  }
  if (crossing > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        c.name, ": dcn_data_parallelism=", c.dcn.data, ", dcn_fsdp_parallelism=", c.dcn.fsdp,
        ", dcn_tensor_parallelism=", c.dcn.tensor,
        ": the slices form one DCN ring, so only one of them may be above 1"));
  }
  // ICI: hand the physical axes longer than 1 to data, fsdp and tensor so
  // that the products match; the first assignment in (x, y, z) x (data,
  // fsdp, tensor) order wins.
  std::vector<Axis> physical;
  for (Axis a : {Axis::kX, Axis::kY, Axis::kZ}) {
    if (topo.AxisSize(a) > 1) physical.push_back(a);
  }
  const int want[3] = {c.ici.data, c.ici.fsdp, c.ici.tensor};
  const int n = static_cast<int>(physical.size());
  int total = 1;
  for (int i = 0; i < n; ++i) total *= 3;
  for (int code = 0; code < total; ++code) {
    int product[3] = {1, 1, 1};
    std::vector<int> owner(n);
    for (int i = 0, rest = code; i < n; ++i, rest /= 3) {
      owner[i] = rest % 3;
      product[owner[i]] *= topo.AxisSize(physical[i]);
    }
    if (product[0] != want[0] || product[1] != want[1] || product[2] != want[2]) continue;
    for (int i = 0; i < n; ++i) mesh.axes_[owner[i]].push_back(physical[i]);
    return mesh;
  }
  std::vector<std::string> sizes;
  for (Axis a : physical) sizes.push_back(absl::StrCat(AxisName(a), "=", topo.AxisSize(a)));
  return absl::InvalidArgumentError(absl::StrCat(
      c.name, ": ici_data_parallelism=", c.ici.data, ", ici_fsdp_parallelism=", c.ici.fsdp,
      ", ici_tensor_parallelism=", c.ici.tensor, " cannot be laid on whole physical axes of ", topo.ShapeString(),
      " (", absl::StrJoin(sizes, ", "), "); each must be a product of some of them"));
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
  for (MeshAxisKind k : {MeshAxisKind::kData, MeshAxisKind::kFsdp, MeshAxisKind::kTensor}) {
    std::vector<std::string> names;
    for (Axis a : axes(k)) names.push_back(AxisName(a));
    parts.push_back(absl::StrCat(MeshAxisName(k), "=", names.empty() ? "-" : absl::StrJoin(names, ","), "(",
                                 size(k), ")"));
  }
  return absl::StrJoin(parts, " ");
}

}  // namespace tpuemu
