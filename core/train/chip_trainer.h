// One chip's share of a training step (DESIGN §6, seed 001's algorithms):
// its shards of the batch, the weights and the optimizer state, and the
// collectives the mesh asks for:
//   data   : gradients AllReduced (after the fsdp ReduceScatter: hierarchical)
//   fsdp   : weights AllGathered just in time (forward and again backward),
//            gradients ReduceScattered, optimizer state sharded (ZeRO-3)
//   tensor : activations AllGathered before Win, ReduceScattered after Wout;
//            in the backward pass the same, transposed (Megatron)
//   pipeline: the chip holds its stage's layer groups and runs the stage's
//            schedule of microbatches (pipeline_schedule.h), receiving
//            activations from the previous stage and gradients from the
//            next over the pipeline axis' links (permute.h)
// Gradients are accumulated over microbatches and reduced over fsdp and
// data once per step, as soon as a layer's last microbatch is through.
// Layouts: Win[D_fsdp, F_tensor], Wout[F_tensor, D_fsdp], activations
// between blocks X[B_(data,fsdp), D_tensor]. Every op advances the chip's
// emulated clock: matmuls and elementwise ops by their roofline time,
// collectives and permutes by what their transfers did.
#pragma once

#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "core/collective/executor.h"
#include "core/collective/plan.h"
#include "core/wire/host_network.h"
#include "core/tensor/local_tensor.h"
#include "core/train/pipeline_schedule.h"
#include "core/train/chip_weights.h"
#include "core/train/config.h"
#include "core/train/mesh.h"
#include "core/train/model.h"

namespace tpuemu {

class ChipTrainer {
 public:
  // `abort` is the job's: the chip stops computing between blocks once it is set.
  ChipTrainer(const TrainConfig& config, const TrainMesh& mesh, int chip, HostNetwork& net, uint64_t job,
              std::shared_ptr<JobAbort> abort);
  // The chip's weight shards and optimizer state (not timed).
  void Prepare();
  // One step; the result's training fields are filled in.
  absl::StatusOr<ChipRunResult> Step(int step);
  // Sum of squares of the chip's weight shards (checks the final
  // parameters); 0 on data-parallel replicas other than the first.
  double ParamSquares() const;

  // Whether the chip's stage holds layer l.
  bool owns(int l) const { return weights_.owns(l); }
  // The chip's shard of layer l's Win [D/fsdp, F/tensor] and Wout [F/tensor, D/fsdp].
  const LocalTensor& win(int l) const { return weights_.win(l); }
  const LocalTensor& wout(int l) const { return weights_.wout(l); }
  // Where those shards sit in the full matrices.
  int64_t d_offset() const { return fi_ * d_f_; }  // first row of Win, first column of Wout
  int64_t f_offset() const { return ti_ * f_t_; }  // first column of Win, first row of Wout

 private:
  // Runs a collective over a logical axis on `t` along `dim`: AllGather
  // concatenates blocks, ReduceScatter keeps this chip's block, AllReduce
  // sums in place. A no-op when the axis has one chip.
  // With `ready`, the collective is issued ahead: it starts at max(now,
  // *ready) on the emulated clock, the chip does not wait, and *ready says
  // when it is done.
  absl::Status Collective(CollectiveOp op, MeshAxisKind axis, LocalTensor& t, int dim, double* ready = nullptr);
  // One microbatch through one of the stage's layer groups, forward (the
  // input from the previous stage, or the batch) or backward (the gradient
  // from the next stage, or the loss).
  absl::Status Forward(const PipelineOp& op);
  absl::Status Backward(const PipelineOp& op);
  absl::Status LayerForward(int m, int l, LocalTensor& x);
  absl::Status LayerBackward(int m, int l, LocalTensor& dx);
  // The loss of microbatch m's output, and its gradient.
  LocalTensor Loss(int m, const LocalTensor& x);
  // The chip's rows of microbatch m: tokens, or the teacher's targets.
  LocalTensor MicrobatchTokens(int m, bool targets) const;
  // Forward: activations to the next stage, from the previous one; backward:
  // gradients to the previous stage, from the next one.
  absl::Status SendToStage(bool forward, const PipelineOp& op, int group, const LocalTensor& t);
  absl::Status ReceiveFromStage(bool forward, const PipelineOp& op, int group, LocalTensor& t);
  int first_layer(int group) const { return group * layers_per_group_; }
  uint64_t PermuteTag(bool forward, const PipelineOp& op, int group) const;
  std::string SpanName(const PipelineOp& op, int group) const;
  RunOptions Options();
  absl::Status GatherOnce();
  // sum += g, charged as an elementwise op (a fresh sum takes g as it is).
  void Accumulate(LocalTensor& sum, LocalTensor&& g);
  // Layer weights gathered over fsdp for the next weight use (a layer's
  // forward or backward, in the order of the stage's schedule). With
  // pipeline_fsdp_ag_once they were gathered once at the step's start.
  // Otherwise without fsdp_prefetch they are gathered here and now; with
  // it, during the previous use (the chip waits only for what has not
  // arrived yet), and the next use's gathers are issued.
  absl::Status GatheredWeight(int use, bool in, LocalTensor& out);
  struct Ahead {
    LocalTensor win, wout;
    double in_ready = 0, out_ready = 0;
    absl::Status status;
  };
  Ahead& Current(int use);
  // Issues the gathers of a layer's Win and Wout ahead into `a`.
  void IssueGathers(int layer, Ahead& a);
  enum class ComputeKind { kForwardMatmul = 0, kBackwardMatmul = 1, kOther = 2 };
  void Compute(ComputeKind kind, double flops, double hbm_bytes);
  // ReduceScatter over fsdp, then AllReduce over data, issued ahead; `ready`
  // says when the reduced gradient is in.
  absl::Status ReduceGradient(LocalTensor& g, int d_dim, double& ready);
  void WaitForGradient(double ready);
  // Advances the clock to `until`, counting the wait as exposed communication.
  void Wait(MeshAxisKind axis, double until, const std::string& what);
  void HoldActivations(int64_t elements);
  std::string Track() const;
  // nullptr if the collective cannot split the array evenly.
  const CollectivePlan* PlanFor(CollectiveOp op, MeshAxisKind axis, uint64_t elements);

  const TrainConfig c_;
  const TrainMesh& mesh_;
  const int chip_;
  HostNetwork& net_;
  const uint64_t job_;
  const std::shared_ptr<JobAbort> abort_;
  int64_t b_, d_f_, f_t_, d_t_;  // local sizes
  int64_t b_mb_;                 // the chip's rows of one microbatch
  int bi_, fi_, ti_;             // batch, fsdp and tensor indices
  int stage_, stages_, layers_per_group_;
  StageLink previous_stage_, next_stage_;  // with more than one stage
  ChipWeights weights_;
  // The teacher, whole, on the last stage: it makes the targets (data
  // generation, not charged).
  ModelWeights teacher_;
  std::map<std::tuple<int, int, uint64_t>, std::unique_ptr<CollectivePlan>> plans_;
  // Per step.
  int step_ = 0;
  std::vector<int> weight_uses_;  // the layer of each weight use, in order
  int next_use_ = 0;
  LinkClocks links_;
  std::map<int, Ahead> ahead_;          // fsdp_prefetch: gathers issued, by weight use
  std::map<int, Ahead> gathered_once_;  // pipeline_fsdp_ag_once: by layer
  struct Saved {
    LocalTensor xg, h;  // a layer's gathered input and pre-activation
  };
  std::map<std::pair<int, int>, Saved> saved_;  // by (microbatch, layer)
  std::map<int, LocalTensor> loss_grad_;        // by microbatch, on the last stage
  int64_t activation_elements_ = 0;
  std::vector<LocalTensor> dwins_, dwouts_;     // accumulated over microbatches
  std::vector<int> grads_in_;                   // microbatches accumulated, by layer
  std::vector<double> grad_ready_in_, grad_ready_out_;
  double pipeline_wait_s_ = 0;
  std::vector<std::pair<double, double>> busy_[kMeshAxes];  // transfer intervals, by mesh axis
  WallClock::time_point wall_mark_;  // paced runs: when the last op ended on the wall clock
  double now_ = 0;
  int collectives_ = 0;
  ChipRunResult result_;
};

}  // namespace tpuemu
