// Trains a job sharded over the in-memory pod and on one device side by
// side, expecting DESIGN §6's invariant: the loss of every step and every
// final weight shard within 1e-5 relative of the one-device reference.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/collective/executor.h"
#include "core/pod/topology.h"
#include "core/train/config.h"
#include "core/train/mesh.h"

namespace tpuemu {

struct ComparedRun {
  bool ok = false;  // the job ran (failures are reported to gtest)
  TrainConfig config;
  std::optional<Topology> topo;
  std::optional<TrainMesh> mesh;
  std::vector<double> losses;
  std::vector<std::vector<ChipRunResult>> steps;  // every chip's result, by step
};

ComparedRun TrainAndCompare(const std::string& topology, int slices, const std::string& job_text, int steps);

}  // namespace tpuemu
