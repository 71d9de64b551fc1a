// What a collective job asks for.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/pod/faults.h"
#include "core/pod/topology.h"

namespace tpuemu {

enum class CollectiveOp { kAllGather, kReduceScatter, kAllReduce, kAllToAll };
enum class RingAlgorithm { kAuto, kUniRing, kBiRing, kLine };

std::string OpName(CollectiveOp op);
absl::StatusOr<CollectiveOp> ParseOp(const std::string& name);
std::string AlgorithmName(RingAlgorithm alg);
absl::StatusOr<RingAlgorithm> ParseAlgorithm(const std::string& name);
absl::StatusOr<std::vector<Axis>> ParseAxes(const std::string& csv);
std::string AxesName(const std::vector<Axis>& axes);

// The largest wire chunk: a frame carries one, and a peer stream takes
// messages of up to 8 MiB (services/grpc_fabric.cc).
inline constexpr uint64_t kMaxChunkBytes = 4 << 20;

struct CollectiveSpec {
  static constexpr char kKind[] = "collective";
  CollectiveOp op = CollectiveOp::kAllGather;
  std::vector<Axis> axes;
  uint64_t bytes = 0;          // V: the full array, in emulated bytes
  RingAlgorithm algorithm = RingAlgorithm::kAuto;
  int dtype_bytes = 2;         // emulated element size (bf16 = 2, f32 = 4)
  uint64_t seed = 1;
  uint64_t chunk_bytes = 1 << 20;  // host bytes per wire chunk, 1 KiB to kMaxChunkBytes
  int num_slices = 0;              // slices it runs on (0: all the pod's); fewer leave the rest to other jobs
  Faults faults = {};              // slow links and stragglers (issue 17), in the chip numbers it sees
  int fault_step = 0;              // the step whose down links the plan avoids (a training job's)

  uint64_t elements() const { return bytes / dtype_bytes; }
};

}  // namespace tpuemu
