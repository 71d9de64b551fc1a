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
// With attention (attention.h) each block is attention, then the MLP, the
// tensor axis splitting heads as it splits F: the same gather before and
// reduce-scatter after each part. With a vocabulary (vocab.h) the first
// layer embeds token ids first, each tensor shard looking up the ids of its
// block of the vocabulary and a reduce-scatter summing the rows; the last
// layer ends with the vocabulary projection, each tensor shard making its
// block of the logits and the shards exchanging a few statistics per row
// (an all-gather) for the cross-entropy, whose gradient is kept for the
// backward pass.
// Layouts: Win[D_fsdp, F_tensor], Wout[F_tensor, D_fsdp], Wq, Wk,
// Wv[D_fsdp, heads_tensor], Wo[heads_tensor, D_fsdp], activations between
// blocks X[B_(data,fsdp), D_tensor] (whole sequences with attention). Every op advances the chip's
// emulated clock: matmuls and elementwise ops by their roofline time,
// collectives and permutes by what their transfers did.
// This file is the algorithm; its mechanics are pieces of their own: the
// weight shards and optimizer (chip_weights.h), the fsdp gathers
// (fsdp_gather.h), the links between stages (stage_links.h), the
// collectives and permutes on the chip's links (mesh_comm.h), and the
// clock with the step's figures and trace (step_clock.h).
#pragma once

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/host/chip_result.h"
#include "core/tensor/local_tensor.h"
#include "core/train/activation.h"
#include "core/train/chip_weights.h"
#include "core/train/config.h"
#include "core/train/fsdp_gather.h"
#include "core/train/mesh.h"
#include "core/train/mesh_comm.h"
#include "core/train/model.h"
#include "core/train/pipeline_schedule.h"
#include "core/train/stage_links.h"
#include "core/train/step_clock.h"
#include "core/train/teacher_targets.h"
#include "core/wire/host_network.h"
#include "core/wire/job_abort.h"

namespace tpuemu {

class ChipTrainer {
 public:
  // `abort` is the job's: the chip stops computing between blocks once it is set.
  ChipTrainer(const TrainConfig& config, const TrainMesh& mesh, int chip, HostNetwork& net, uint64_t job,
              std::shared_ptr<JobAbort> abort);
  // Its pieces hold references to one another and to its members.
  ChipTrainer(const ChipTrainer&) = delete;
  ChipTrainer& operator=(const ChipTrainer&) = delete;
  // The chip's weight shards and optimizer state (not timed). `targets`
  // are the host's, taken by the chips of the last stage, each of its rows
  // by `target_takers` chips of the host (its batch shard's tensor shards).
  void Prepare(std::shared_ptr<TeacherTargets> targets, int target_takers);
  bool last_stage() const { return stage_ == stages_ - 1; }
  // One step; the result's training fields are filled in.
  absl::StatusOr<ChipRunResult> Step(int step);
  // The faults in force from the next step on (the job's own, and those
  // `tpuemu fault` added); between steps only.
  void SetFaults(const Faults& faults) { c_.faults = faults; }
  // Sum of squares of the chip's weight shards (checks the final
  // parameters); 0 on data-parallel replicas other than the first.
  double ParamSquares() const;
  // The chip's weight shards and optimizer state, for a checkpoint, and back
  // (after Prepare).
  std::string SaveState() const { return weights_.Save(); }
  absl::Status RestoreState(const std::string& state) { return weights_.Restore(state); }

  // Whether the chip's stage holds layer l.
  bool owns(int l) const { return weights_.owns(l); }
  // The chip's shard of layer l's matrix m: [D/fsdp, width/tensor] along D
  // (Win, Wup, Wq, Wk, Wv), else [width/tensor, D/fsdp] (Wout, Wo).
  const LocalTensor& weight(Matrix m, int l) const { return weights_.weight(m, l); }
  // Where those shards sit in the full matrices.
  int64_t d_offset() const { return fi_ * d_f_; }  // first row along D
  int64_t width_offset(Matrix m) const { return ti_ * (MatrixWidth(c_, m) / mesh_.size(MeshAxisKind::kTensor)); }
  int64_t vocab_offset() const { return width_offset(Matrix::kVocab); }  // the chip's first vocabulary id

 private:
  // One microbatch through one of the stage's layer groups, forward (the
  // input from the previous stage, or the batch) or backward (the gradient
  // from the next stage, or the loss).
  absl::Status Forward(const PipelineOp& op);
  absl::Status Backward(const PipelineOp& op);
  absl::Status LayerForward(int m, int l, LocalTensor& x);
  absl::Status LayerBackward(int m, int l, LocalTensor& dx);
  // A block's two parts for weight use `use`: attention (when the model has
  // it), then the MLP; backward the other way round. `last`: the layer's
  // last microbatch, whose gradients are then reduced.
  absl::Status AttentionForward(int m, int l, int use, LocalTensor& x);
  absl::Status AttentionBackward(int m, int l, int use, bool last, LocalTensor& dx);
  absl::Status MlpForward(int m, int l, int use, LocalTensor& x);
  absl::Status MlpBackward(int m, int l, int use, bool last, LocalTensor& dx);
  // The loss of microbatch m's output, and its gradient.
  LocalTensor Loss(int m, const LocalTensor& x);
  // With a vocabulary: microbatch m's embedded tokens into x, and the
  // embedding's gradient from theirs (dx); the vocabulary projection and
  // cross-entropy of the last layer's output x, and from what they kept the
  // gradient of that output into dx.
  absl::Status Embed(int m, int use, LocalTensor& x);
  absl::Status EmbedBackward(int m, int l, bool last, const LocalTensor& dx);
  absl::Status VocabForward(int m, int use, const LocalTensor& x);
  absl::Status VocabBackward(int m, int l, int use, bool last, LocalTensor& dx);
  // The chip's rows of microbatch m as token ids, or their targets.
  std::vector<int64_t> MicrobatchIds(int m, bool targets) const;
  // The chip's rows of microbatch m: tokens, or the teacher's targets.
  LocalTensor MicrobatchTokens(int m, bool targets) const;
  int first_layer(int group) const { return group * layers_per_group_; }
  std::string SpanName(const PipelineOp& op, int group) const;
  // sum += g, charged as an elementwise op (a fresh sum takes g as it is).
  void Accumulate(LocalTensor& sum, LocalTensor&& g);
  // A gated MLP's a * u, elementwise, charged.
  LocalTensor Gated(const LocalTensor& a, const LocalTensor& u);
  // ReduceScatter over fsdp, then AllReduce over data, issued ahead; `ready`
  // says when the reduced gradient is in.
  absl::Status ReduceGradient(LocalTensor& g, int d_dim, double& ready);
  // A matmul's gradient into the layer's sum, reduced ahead after the last microbatch.
  absl::Status AddGradient(int l, Matrix m, LocalTensor&& g, bool last);
  // y = op(a) * op(b), charged to `kind` with its operands' HBM traffic.
  LocalTensor Multiply(const LocalTensor& a, bool at, const LocalTensor& b, bool bt, ComputeKind kind);
  // An elementwise op over n elements: `flops` and `accesses` (reads and
  // writes, in the emulated dtype) per element.
  void ChargeElementwise(int64_t n, double flops, double accesses);

  TrainConfig c_;  // only its faults change, between steps (SetFaults)
  const TrainMesh& mesh_;
  const Activation activation_;
  const int chip_;
  const std::shared_ptr<JobAbort> abort_;
  int64_t d_f_, f_t_, d_t_;  // local sizes
  int64_t b_mb_;             // the chip's rows of one microbatch
  int bi_, fi_, ti_;         // batch, fsdp and tensor indices
  int stage_, stages_, layers_per_group_;
  ChipWeights weights_;
  // The teacher's outputs, on the last stage (data generation, not
  // charged): made once per host, shared by its chips.
  std::shared_ptr<TeacherTargets> targets_;
  int target_takers_ = 0;
  StepClock clock_;
  MeshComm comm_;
  FsdpGather fsdp_;
  StageLinks stage_links_;
  // Per step.
  int step_ = 0;
  struct Saved {
    // A layer's gathered input, activation and the activation's derivative
    // (made with the activation: one transcendental per element), and for a
    // gated MLP the up-projection it multiplies; with full remat, only the
    // layer's input shard (`input`), the rest made again in the backward pass.
    LocalTensor xg, a, grad, u, input;
  };
  // A layer's forward up to Wout's input, for use `use`: x gathered over
  // tensor into s.xg, then s.grad (the pre-activation, which becomes the
  // activation's derivative), s.u (gated MLPs) and s.a. The gathered Win
  // (and Wup) are left in *w (and *wu).
  absl::Status ForwardToOut(int use, const LocalTensor& x, Saved& s, LocalTensor* w, LocalTensor* wu);
  // Elements a layer's Saved holds for the backward pass (the activations charged).
  int64_t HeldElements(const Saved& s) const;
  std::map<std::pair<int, int>, Saved> saved_;  // by (microbatch, layer)
  // What attention keeps: its gathered input, q, k, v (the chip's heads),
  // the probabilities and o; with full remat only its input shard.
  struct AttentionSaved {
    LocalTensor xg, q, k, v, p, o, input;
  };
  // Attention up to Wo's input: x gathered over tensor, the projections
  // with the gathered Wq, Wk, Wv (left in w[0..2]) and the heads' attention.
  absl::Status AttentionToOut(int use, const LocalTensor& x, AttentionSaved& s, LocalTensor* w);
  int64_t HeldElements(const AttentionSaved& s) const;
  std::map<std::pair<int, int>, AttentionSaved> attention_saved_;  // by (microbatch, layer)
  // What the vocabulary projection keeps: its gathered input and the logits' gradient.
  struct VocabSaved {
    LocalTensor xg, dlogits;
  };
  std::map<int, VocabSaved> vocab_saved_;       // by microbatch, on the last stage
  std::map<int, LocalTensor> loss_grad_;        // by microbatch, on the last stage
  // Squared errors of the chip's outputs; with a vocabulary, the
  // cross-entropy of its rows (counted by the first tensor shard: every
  // shard computes the same).
  double loss_sum_ = 0;
  // A layer's gradients by Matrix, accumulated over microbatches, then
  // reduced ahead.
  struct LayerGradients {
    LocalTensor g[kMatrixKinds];
    int microbatches = 0;            // accumulated so far
    double ready[kMatrixKinds] = {};  // when the reduced ones are in
  };
  std::vector<LayerGradients> grads_;  // by layer
};

}  // namespace tpuemu
