// What a training step cost, as users see it (issue 4): the loss, the step on
// the emulated clock split into compute and exposed communication per mesh
// axis, MFU, tokens/s, bytes each chip sent, and memory per chip by item.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/train/chip_trainer.h"
#include "core/train/config.h"
#include "core/train/mesh.h"

namespace tpuemu {

// Per-chip memory by item, in emulated bytes (dtype for parameters,
// gradients, activations and gathered weights; fp32 Adam moments).
struct MemoryItem {
  std::string name;
  double bytes = 0;
};
std::vector<MemoryItem> ChipMemory(const TrainConfig& c, const TrainMesh& mesh);
double ChipHbmBytes(const TrainConfig& c, const Topology& topo);

// Host memory (fp32) one emulated chip holds: its shards of weights,
// gradients and Adam moments, activations, gathered weights, its batch rows.
double ChipHostBytes(const TrainConfig& c, const TrainMesh& mesh);
// And what a host keeps once for all its chips: the whole teacher, without a
// vocabulary (an upper bound: with pipeline stages only hosts of the last
// stage keep it).
double HostTeacherBytes(const TrainConfig& c);

// Refuses a job that does not fit before anything is allocated, naming the
// largest items like an XLA out-of-memory report.
absl::Status CheckMemory(const TrainConfig& c, const TrainMesh& mesh, const Topology& topo);

struct StepReport {
  int step = 0;
  double loss = 0;
  double emulated_s = 0;        // slowest chip
  double compute_s = 0;         // on that chip
  double compute_parts_s[kComputeParts] = {};  // of which forward matmuls, backward matmuls, the rest
  // On that chip, by data, fsdp, tensor, pipeline: waits (for pipeline:
  // waits for the neighbouring stages, the bubble included) and the time
  // the axis' transfers ran, hidden or not.
  double exposed_comm_s[kMeshAxes] = {};
  double comm_s[kMeshAxes] = {};
  double mfu = 0;               // model flops / (chips x C x emulated_s)
  double tokens_per_s_emulated = 0;
  double tokens_per_s_wall = 0;
  double wall_s = 0;
  uint64_t comm_bytes[kMeshAxes] = {};  // busiest chip, by mesh axis
  uint64_t comm_bytes_total = 0;                  // busiest chip
  double host_lag_s = 0;
  // Pipelines: the stages' idle time over the span of the microbatches
  // (from the step's start to the last stage to finish them), over chips x
  // span; the seeds' formula for it; the most activation bytes any chip
  // held for backward passes at once.
  double bubble_fraction = 0;
  double bubble_formula = 0;
  // The seeds' formula with the stage hops counted (BubbleWithTransfers),
  // from a microbatch's forward and backward matmuls on the slowest chip
  // and one hop of its activations over the pipeline axis's link.
  double bubble_with_transfers = 0;
  double bubble_microbatch_compute_s = 0;
  double bubble_hop_s = 0;
  uint64_t peak_activation_bytes = 0;
  std::vector<std::string> faults;  // in force during the step, in words (core/pod/faults.h)
};

// Model flops of one step: forward 2 matmuls of 2 B D F per layer, backward
// twice that.
double StepModelFlops(const TrainConfig& c);

StepReport SummarizeStep(const TrainConfig& c, const TrainMesh& mesh, const Topology& topo,
                         const std::vector<ChipRunResult>& chips);

// One row of the per-layer comparison with seed 001's table: what the seed's
// formula predicts for one layer on one chip, and what the emulated step did
// (measured bytes and times divided by the layers a chip holds).
struct LayerCost {
  std::string what;     // "data", "fsdp", "tensor", "pipeline" or "compute"
  std::string formula;  // "8 D F/T/Z (N-1)/N bytes"
  double predicted_bytes = 0;
  double emulated_bytes = 0;
  double predicted_s = 0;  // the collective oracle's time on the axis's own links; flops / C
  double emulated_s = 0;   // the axis' collectives' busy time; the matmuls' time
  std::string time_formula;  // "AllReduce of 2 MiB on ICI y, then DCN (hierarchical)"
};
std::vector<LayerCost> PerLayerCosts(const TrainConfig& c, const TrainMesh& mesh, const Topology& topo,
                                     const StepReport& step);

// What a training job holds per chip, published before its first step, and
// once it has finished its parameters' norm and the per-layer comparison.
struct TrainReport {
  std::string mesh;  // "data=x(4) fsdp=-(1) tensor=y(2) pipeline=-(1)"
  std::string pipeline_schedule;
  int stages = 1;
  int microbatches = 1;
  int repeats = 1;
  std::vector<MemoryItem> memory_per_chip;
  double hbm_bytes = 0;
  double model_flops_per_step = 0;
  double param_l2 = 0;              // over all chips, after the last step
  std::vector<LayerCost> per_layer;  // from the last step
};
TrainReport PreviewTraining(const TrainConfig& c, const TrainMesh& mesh, const Topology& topo);

}  // namespace tpuemu
