#include "core/train/chip_trainer.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/tensor/gemm.h"
#include "core/train/activation.h"

namespace tpuemu {
namespace {

// c = op(a) * op(b) for two matrices held as tensors; partial once `abort`
// is set; shape-only (and nothing multiplied) for shape-only operands.
LocalTensor MatMul(const LocalTensor& a, bool at, const LocalTensor& b, bool bt, const JobAbort& abort) {
  std::vector<int64_t> shape = {at ? a.shape[1] : a.shape[0], bt ? b.shape[0] : b.shape[1]};
  if (!a.has_values() || !b.has_values()) return LocalTensor::ShapeOnly(std::move(shape));
  LocalTensor c = LocalTensor::Allocate(std::move(shape));
  tpuemu::MatMul(a.data.get(), a.shape[0], a.shape[1], at, b.data.get(), b.shape[0], b.shape[1], bt, c.data.get(),
                 &abort);
  return c;
}

double MatMulFlops(const LocalTensor& c, int64_t k) { return 2.0 * static_cast<double>(c.elements()) * k; }

}  // namespace

ChipTrainer::ChipTrainer(const TrainConfig& config, const TrainMesh& mesh, int chip, HostNetwork& net, uint64_t job,
                         std::shared_ptr<JobAbort> abort)
    : c_(config),
      mesh_(mesh),
      activation_(ActivationNamed(c_.activation)),
      chip_(chip),
      abort_(std::move(abort)),
      clock_(chip, net, *abort_, c_.dtype_bytes, &c_.faults),
      comm_(c_, mesh, chip, net, job, abort_, clock_),
      fsdp_(c_, mesh, weights_, comm_, clock_),
      stage_links_(mesh, chip, comm_, clock_) {
  const int data = mesh.size(MeshAxisKind::kData), fsdp = mesh.size(MeshAxisKind::kFsdp),
            tensor = mesh.size(MeshAxisKind::kTensor);
  b_mb_ = c_.global_batch_tokens / (data * fsdp) / c_.num_microbatches;
  d_f_ = c_.emb_dim / fsdp;
  f_t_ = c_.mlp_dim / tensor;
  d_t_ = c_.emb_dim / tensor;
  bi_ = mesh.BatchIndex(chip);
  fi_ = mesh.Index(chip, MeshAxisKind::kFsdp);
  ti_ = mesh.Index(chip, MeshAxisKind::kTensor);
  stages_ = mesh.stages();
  stage_ = mesh.Stage(chip);
  layers_per_group_ = c_.num_layers / (stages_ * c_.pipeline_repeats);
}

void ChipTrainer::Prepare(std::shared_ptr<const ModelWeights> teacher) {
  std::vector<bool> owned(c_.num_layers);
  for (int l = 0; l < c_.num_layers; ++l) owned[l] = (l / layers_per_group_) % stages_ == stage_;
  weights_.Init(c_, owned, {d_offset(), d_f_, f_offset(), f_t_});
  // The last stage computes the loss: it makes the targets with the teacher.
  if (last_stage()) teacher_ = std::move(teacher);
}

absl::Status ChipTrainer::ReduceGradient(LocalTensor& g, int d_dim, double& ready) {
  ready = clock_.now();
  if (auto s = comm_.Collective(CollectiveOp::kReduceScatter, MeshAxisKind::kFsdp, g, d_dim, &ready); !s.ok()) return s;
  return comm_.Collective(CollectiveOp::kAllReduce, MeshAxisKind::kData, g, 0, &ready);
}

LocalTensor ChipTrainer::MicrobatchTokens(int m, bool targets) const {
  // Microbatch m is rows [m B/M, (m+1) B/M) of the global batch; the chip
  // has its batch shard's share of them.
  const int tensor = mesh_.size(MeshAxisKind::kTensor);
  if (c_.shape_only()) return LocalTensor::ShapeOnly({b_mb_, c_.emb_dim / tensor});
  const int64_t first = m * (c_.global_batch_tokens / c_.num_microbatches) + bi_ * b_mb_;
  std::vector<float> tokens = BatchTokens(c_, step_, first, b_mb_);
  if (targets) ForwardPass(c_, *teacher_, tokens);
  LocalTensor x = LocalTensor::Allocate({b_mb_, c_.emb_dim});
  std::memcpy(x.data.get(), tokens.data(), tokens.size() * sizeof(float));
  return SliceBlock(x, 1, tensor, ti_);
}

absl::Status ChipTrainer::LayerForward(int m, int l, LocalTensor& x) {
  if (abort_->aborted()) return abort_->status();
  const int use = fsdp_.NextUse();
  const double bytes = c_.dtype_bytes;
  LocalTensor xg = x;
  if (auto s = comm_.Collective(CollectiveOp::kAllGather, MeshAxisKind::kTensor, xg, 1); !s.ok()) return s;
  LocalTensor w;
  if (auto s = fsdp_.Gathered(use, true, w); !s.ok()) return s;
  LocalTensor h = MatMul(xg, false, w, false, *abort_);
  clock_.Compute(ComputeKind::kForwardMatmul, MatMulFlops(h, c_.emb_dim),
                 (xg.elements() + w.elements() + h.elements()) * bytes);
  // h becomes the activation's derivative, kept for the backward pass.
  LocalTensor a = LocalTensor::Make(h.shape, h.has_values());
  if (h.has_values()) ActivateWithGrad(activation_, h.data.get(), h.elements(), a.data.get(), h.data.get());
  clock_.Compute(ComputeKind::kOther, static_cast<double>(a.elements()), 2.0 * a.elements() * bytes);
  LocalTensor wo;
  if (auto s = fsdp_.Gathered(use, false, wo); !s.ok()) return s;
  LocalTensor out = MatMul(a, false, wo, false, *abort_);
  clock_.Compute(ComputeKind::kForwardMatmul, MatMulFlops(out, f_t_),
                 (a.elements() + wo.elements() + out.elements()) * bytes);
  if (auto s = comm_.Collective(CollectiveOp::kReduceScatter, MeshAxisKind::kTensor, out, 1); !s.ok()) return s;
  // Charged as a TPU would hold them: the input and the pre-activation (the
  // host's second [B, F] buffer spares it recomputing the activation).
  clock_.HoldActivations(xg.elements() + h.elements());
  saved_[{m, l}] = {std::move(xg), std::move(a), std::move(h)};
  x = std::move(out);
  return absl::OkStatus();
}

LocalTensor ChipTrainer::Loss(int m, const LocalTensor& x) {
  // The chip's block of the mean squared error; its gradient is that of the
  // mean over the whole batch.
  const LocalTensor y = MicrobatchTokens(m, true);
  LocalTensor dx = LocalTensor::Make(x.shape, x.has_values());
  const double scale = 1.0 / static_cast<double>(c_.global_batch_tokens * c_.emb_dim);
  for (int64_t i = 0; x.has_values() && i < x.elements(); ++i) {
    const double e = static_cast<double>(x.data[i]) - y.data[i];
    loss_sum_ += e * e;
    dx.data[i] = static_cast<float>(2 * e * scale);
  }
  clock_.Compute(ComputeKind::kOther, 3.0 * x.elements(), 3.0 * x.elements() * c_.dtype_bytes);
  return dx;
}

void ChipTrainer::Accumulate(LocalTensor& sum, LocalTensor&& g) {
  if (sum.shape.empty()) {
    sum = std::move(g);
    return;
  }
  for (int64_t i = 0; sum.has_values() && i < g.elements(); ++i) sum.data[i] += g.data[i];
  clock_.Compute(ComputeKind::kOther, static_cast<double>(g.elements()), 3.0 * g.elements() * c_.dtype_bytes);
}

absl::Status ChipTrainer::LayerBackward(int m, int l, LocalTensor& dx) {
  if (abort_->aborted()) return abort_->status();
  const int use = fsdp_.NextUse();
  const double bytes = c_.dtype_bytes;
  Saved saved = std::move(saved_.at({m, l}));
  saved_.erase({m, l});
  clock_.HoldActivations(-(saved.xg.elements() + saved.grad.elements()));
  // The layer's gradients are complete with its last microbatch: then they
  // are reduced, ahead, while the chip computes on.
  LayerGradients& grads = grads_[l];
  const bool last = ++grads.microbatches == c_.num_microbatches;
  LocalTensor dog = dx;
  if (auto s = comm_.Collective(CollectiveOp::kAllGather, MeshAxisKind::kTensor, dog, 1); !s.ok()) return s;
  // The emulated chip recomputes the activation (charged); the host kept it.
  const LocalTensor& a = saved.a;
  clock_.Compute(ComputeKind::kOther, static_cast<double>(a.elements()), 2.0 * a.elements() * bytes);
  LocalTensor dwout = MatMul(a, true, dog, false, *abort_);  // [F_t, D], partial over the batch
  clock_.Compute(ComputeKind::kBackwardMatmul, MatMulFlops(dwout, b_mb_),
                 (a.elements() + dog.elements() + dwout.elements()) * bytes);
  Accumulate(grads.wout, std::move(dwout));
  if (last) {
    if (auto s = ReduceGradient(grads.wout, 1, grads.out_ready); !s.ok()) return s;
  }
  LocalTensor wo;
  if (auto s = fsdp_.Gathered(use, false, wo); !s.ok()) return s;
  LocalTensor dh = MatMul(dog, false, wo, true, *abort_);  // [B, F_t]
  clock_.Compute(ComputeKind::kBackwardMatmul, MatMulFlops(dh, c_.emb_dim),
                 (dog.elements() + wo.elements() + dh.elements()) * bytes);
  for (int64_t i = 0; dh.has_values() && i < dh.elements(); ++i) dh.data[i] *= saved.grad.data[i];
  clock_.Compute(ComputeKind::kOther, 2.0 * dh.elements(), 3.0 * dh.elements() * bytes);
  LocalTensor dwin = MatMul(saved.xg, true, dh, false, *abort_);  // [D, F_t], partial over the batch
  clock_.Compute(ComputeKind::kBackwardMatmul, MatMulFlops(dwin, b_mb_),
                 (saved.xg.elements() + dh.elements() + dwin.elements()) * bytes);
  Accumulate(grads.win, std::move(dwin));
  if (last) {
    if (auto s = ReduceGradient(grads.win, 0, grads.in_ready); !s.ok()) return s;
  }
  LocalTensor w;
  if (auto s = fsdp_.Gathered(use, true, w); !s.ok()) return s;
  LocalTensor dxg = MatMul(dh, false, w, true, *abort_);  // [B, D], partial over tensor
  clock_.Compute(ComputeKind::kBackwardMatmul, MatMulFlops(dxg, f_t_),
                 (dh.elements() + w.elements() + dxg.elements()) * bytes);
  if (auto s = comm_.Collective(CollectiveOp::kReduceScatter, MeshAxisKind::kTensor, dxg, 1); !s.ok()) return s;
  dx = std::move(dxg);
  return absl::OkStatus();
}

std::string ChipTrainer::SpanName(const PipelineOp& op, int group) const {
  const int first = first_layer(group), last = first + layers_per_group_ - 1;
  return absl::StrCat(op.forward ? "forward" : "backward", " mb ", op.microbatch,
                      c_.pipeline_repeats > 1 ? absl::StrCat(" repeat ", op.repeat) : "", " (layer",
                      first == last ? absl::StrCat(" ", first) : absl::StrCat("s ", first, "-", last), ")");
}

absl::Status ChipTrainer::Forward(const PipelineOp& op) {
  const int group = op.group(stages_, stage_), groups = stages_ * c_.pipeline_repeats;
  LocalTensor x;
  if (group == 0) {
    x = MicrobatchTokens(op.microbatch, false);
  } else {
    x = LocalTensor::Make({b_mb_, d_t_}, !c_.shape_only());
    if (auto s = stage_links_.Receive(true, op, group, x); !s.ok()) return s;
  }
  const double start = clock_.now();
  for (int l = first_layer(group); l < first_layer(group + 1); ++l) {
    if (auto s = LayerForward(op.microbatch, l, x); !s.ok()) return s;
  }
  if (group == groups - 1) {
    loss_grad_[op.microbatch] = Loss(op.microbatch, x);
  } else if (auto s = stage_links_.Send(true, op, group + 1, x); !s.ok()) {
    return s;
  }
  clock_.Span(SpanName(op, group), start, clock_.now());
  return absl::OkStatus();
}

absl::Status ChipTrainer::Backward(const PipelineOp& op) {
  const int group = op.group(stages_, stage_), groups = stages_ * c_.pipeline_repeats;
  LocalTensor dx;
  if (group == groups - 1) {
    dx = std::move(loss_grad_.at(op.microbatch));
    loss_grad_.erase(op.microbatch);
  } else {
    dx = LocalTensor::Make({b_mb_, d_t_}, !c_.shape_only());
    if (auto s = stage_links_.Receive(false, op, group, dx); !s.ok()) return s;
  }
  const double start = clock_.now();
  for (int l = first_layer(group + 1) - 1; l >= first_layer(group); --l) {
    if (auto s = LayerBackward(op.microbatch, l, dx); !s.ok()) return s;
  }
  if (group > 0) {
    if (auto s = stage_links_.Send(false, op, group - 1, dx); !s.ok()) return s;
  }
  clock_.Span(SpanName(op, group), start, clock_.now());
  return absl::OkStatus();
}

absl::StatusOr<ChipRunResult> ChipTrainer::Step(int step) {
  clock_.Start(step);
  comm_.Start();
  step_ = step;
  saved_.clear();
  loss_grad_.clear();
  loss_sum_ = 0;
  const int layers = c_.num_layers;
  grads_.assign(layers, LayerGradients{});

  const std::vector<PipelineOp> schedule =
      StageSchedule(c_.pipeline_schedule, stages_, stage_, c_.num_microbatches, c_.pipeline_repeats);
  std::vector<int> weight_uses;  // the layer of each weight use, in order
  for (const PipelineOp& op : schedule) {
    const int first = first_layer(op.group(stages_, stage_));
    for (int j = 0; j < layers_per_group_; ++j) {
      weight_uses.push_back(op.forward ? first + j : first + layers_per_group_ - 1 - j);
    }
  }
  if (auto s = fsdp_.Start(std::move(weight_uses)); !s.ok()) return s;

  // The stage's microbatches, in its schedule's order.
  for (const PipelineOp& op : schedule) {
    if (auto s = op.forward ? Forward(op) : Backward(op); !s.ok()) return s;
  }
  clock_.PipelineDone();
  // The optimizer step, once each layer's reduced gradients are in.
  for (int l = layers - 1; l >= 0; --l) {
    if (!owns(l)) continue;
    const LayerGradients& grads = grads_[l];
    // Exposed on the axis whose collective finishes the reduction.
    clock_.Wait(mesh_.size(MeshAxisKind::kData) > 1 ? MeshAxisKind::kData : MeshAxisKind::kFsdp,
                std::max(grads.out_ready, grads.in_ready), "reduced gradients");
    for (bool in : {false, true}) {
      const ElementwiseCost cost = weights_.Update(l, in, in ? grads.win : grads.wout, step + 1);
      clock_.Compute(ComputeKind::kOther, cost.flops, cost.hbm_bytes);
    }
  }
  grads_.clear();

  ChipRunResult result = clock_.Finish(comm_.links());
  result.loss_sum = loss_sum_;
  return result;
}

double ChipTrainer::ParamSquares() const {
  // Shards are replicated over the data axis: count one replica. Stages
  // hold different layers.
  return mesh_.Index(chip_, MeshAxisKind::kData) != 0 ? 0 : weights_.SquareSum();
}

}  // namespace tpuemu
