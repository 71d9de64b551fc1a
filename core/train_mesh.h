// A training job's logical mesh (data, fsdp, tensor) laid on the pod's
// physical axes: each logical axis gets whole physical axes (ICI x, y, z,
// and the DCN axis between slices), so that its collectives are the pod's
// ordinary (multi-axis, hierarchical) collectives.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/topology.h"
#include "core/train_config.h"

namespace tpuemu {

enum class MeshAxisKind { kData = 0, kFsdp = 1, kTensor = 2 };
std::string MeshAxisName(MeshAxisKind kind);  // "data", "fsdp", "tensor"

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
  std::string Describe() const;  // "data=dcn(2) fsdp=x(4) tensor=y(4)"

 private:
  Topology topo_;
  std::vector<Axis> axes_[3];
};

}  // namespace tpuemu
