// A training job's logical mesh (data, fsdp, tensor, pipeline) laid on the
// pod's physical axes: each logical axis gets whole physical axes (ICI x, y,
// z, and the DCN axis between slices), so that its collectives are the pod's
// ordinary (multi-axis, hierarchical) collectives. Pipeline stages take one
// physical axis, so that neighbouring stages are one link apart.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/host/step_axes.h"
#include "core/pod/topology.h"
#include "core/train/config.h"

namespace tpuemu {

enum class MeshAxisKind { kData = 0, kFsdp = 1, kTensor = 2, kPipeline = 3 };
inline constexpr MeshAxisKind kAllMeshAxes[kMeshAxes] = {MeshAxisKind::kData, MeshAxisKind::kFsdp,
                                                         MeshAxisKind::kTensor, MeshAxisKind::kPipeline};
std::string MeshAxisName(MeshAxisKind kind);  // "data", "fsdp", "tensor", "pipeline"

// The link a pipeline stage sends on to reach a neighbouring stage.
struct StageLink {
  int peer = 0;  // chip
  Axis axis = Axis::kX;
  int dir = +1;
};

class TrainMesh {
 public:
  // `config` must have been through ResolveMesh.
  static absl::StatusOr<TrainMesh> Create(const TrainConfig& config, const Topology& topo);

  // Physical axes of a logical axis, most significant first (DCN first).
  const std::vector<Axis>& axes(MeshAxisKind kind) const { return axes_[static_cast<int>(kind)]; }
  int size(MeshAxisKind kind) const;
  // A chip's position along a logical axis, or along data then fsdp (the
  // batch shard), most significant first.
  int Index(int chip, MeshAxisKind kind) const;
  int BatchIndex(int chip) const;
  int Stage(int chip) const { return Index(chip, MeshAxisKind::kPipeline); }
  int stages() const { return size(MeshAxisKind::kPipeline); }
  // The chip of stage (Stage(chip) + delta) mod stages at the same place in
  // every other axis, and the link that leads there.
  StageLink StageNeighbor(int chip, int delta) const;
  std::string Describe() const;  // "data=dcn(2) fsdp=x(4) tensor=y(4) pipeline=-(1)"

 private:
  absl::StatusOr<TrainMesh> CheckPipeline(const TrainConfig& c) const;

  Topology topo_;
  std::vector<Axis> axes_[kMeshAxes];
};

}  // namespace tpuemu
