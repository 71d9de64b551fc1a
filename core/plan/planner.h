// Which mesh for this model on this pod: every strategy seed 001 discusses
// (data parallel, FSDP, tensor parallel, FSDP with tensor-parallel rings or
// sub-rings, data parallel over DCN between slices), priced by the seed's
// closed forms, checked against HBM, ranked. Formulas only: nothing runs.
//
// Per layer and chip (seed 001's table, fwd + bwd, bf16), for an MLP of m
// matrices D x F (the seed's 2; a gated MLP's 3 move 3/2 of the weights and
// compute 3/2 of the flops, its activations move the same):
//   compute  fwd 2 m B D F / (n C), bwd twice that (n: chips sharing the batch
//            and the weights' F or D dimension)
//   DP       bwd: AllReduce of the gradients, 2 m D F
//   FSDP     fwd: AllGather of the weights, m D F; bwd: AllGather and
//            ReduceScatter, 2 m D F
//   TP       fwd: AllGather of In and ReduceScatter of Out, 4 B D / X; bwd the same
// each over its axes' links, W = 2 x (one direction's bandwidth) x axes, and a
// pass's communication overlapping its own compute only (the seed's
// "T = max(T_math, T_comms)", pass by pass: DP's AllReduce hides behind the
// backward pass alone). FSDP's and TP's transfers add (the seed's second
// simplification). Attention's own matmuls (the T^2 terms) are left out, as
// the seed leaves them; its projections and the vocabulary count as compute.
//
// Pipelines (seed 001's "briefly", seed 004's GPipe): S stages along one axis,
// FSDP over the others (X = N / S), M = 2 S microbatches (MaxText's advice),
// each stage's weights gathered once per step and its gradients
// reduce-scattered once (pipeline_fsdp_ag_once): 4 bytes per parameter of its
// L / S layers, where FSDP moves 6 per parameter of all L; activations and
// their gradients cross one link per microbatch. The pod idles for the
// bubble, (S - 1) / (M + S - 1) of the step; the transfers hide behind the
// compute where it is longer. Only where S divides the layers.
#pragma once

#include <string>
#include <vector>

#include "core/plan/model_shape.h"
#include "core/pod/topology.h"

namespace tpuemu {

struct PlanMemoryItem {
  std::string what;
  double bytes = 0;
};

struct MeshPlan {
  std::string strategy;  // "DP", "FSDP", "TP", "FSDP+TP", "PP+FSDP"
  std::string mesh;      // e.g. "fsdp: y,z (320) x-sub-ring 4 ... tensor: x/4 (4)"
  int data = 1;          // X: chips sharing the batch in a slice (DP or FSDP)
  int tensor = 1;        // Y: chips sharing the weights' D or F
  int data_axes = 0;     // axes the data group spans
  int tensor_axes = 0;   // axes the tensor group spans
  // M_X, M_Y: those axes' bandwidth in axes' worth: an axis that does not
  // wrap is a line of n chips, n / (2 (n-1)) of a ring's.
  double data_links = 0;
  double tensor_links = 0;
  bool fsdp = false;     // the data group shards the weights
  int stages = 1;        // S: pipeline stages along one axis (PP+FSDP)
  int microbatches = 1;  // M: 2 S with stages
  // HBM per chip: the seed's accounting (bf16 parameters, Adam's two fp32
  // moments, bf16 activations kept after the MLP's matmuls, one layer's
  // gathered weights).
  std::vector<PlanMemoryItem> memory;
  double memory_bytes = 0;
  bool fits = false;
  // Per step, seconds on the emulated chips' roofline.
  double compute_s = 0;      // every parameter's matmuls, 6 B P / (N C)
  double comms_s = 0;        // ICI transfers of the MLPs, all layers
  double dcn_s = 0;          // the gradients' AllReduce between slices
  double step_s = 0;         // passes overlapped as above
  double mfu = 0;            // compute_s / step_s
  bool ici_bound = false;    // some pass waits for its ICI transfers
  bool comms_bound = false;  // some pass waits for its transfers, on ICI or DCN
  // Global batch (tokens) below which this mesh turns communication-bound
  // on ICI or DCN; 0: never in this model (tensor parallelism's transfers
  // grow with the batch); infinity: at any batch.
  double critical_batch_tokens = 0;
  // Global batch below which DCN's AllReduce outlasts the compute hiding it
  // (several slices only).
  double dcn_critical_batch_tokens = 0;
  std::string why;  // one line in the seeds' terms
};

struct PlanRequest {
  ModelShape model;
  double batch_tokens = 0;
};

// Every mesh, best first: those that fit by step time (equal ones by the
// batch down to which they stay compute-bound, then by memory), then those
// that do not fit.
absl::StatusOr<std::vector<MeshPlan>> PlanMeshes(const PlanRequest& request, const Topology& topo);

// Seed 001's closed forms, for the explanations and their tests.
// alpha = C / W_ici: the per-chip batch a DP or FSDP mesh over n_axes axes
// needs (alpha / n_axes); tensor parallelism stays compute-bound while
// Y < n_axes F / alpha; FSDP with tensor parallelism needs B / N >
// 4 alpha^2 / (M_X M_Y F), at the optimal X = sqrt(B / F x M_X / M_Y x N).
double IciIntensity(const ChipProfile& chip);
double MixedMinBatchPerChip(double alpha, double mlp_dim, double data_axes, double tensor_axes);
double OptimalFsdp(double batch_tokens, double mlp_dim, double data_axes, double tensor_axes, double chips);
// The per-slice batch data parallelism over DCN needs: C / W_dcn of a slice.
double DcnMinBatchPerSlice(const Topology& topo);

}  // namespace tpuemu
