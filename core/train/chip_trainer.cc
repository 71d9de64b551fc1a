#include "core/train/chip_trainer.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/tensor/gemm.h"
#include "core/train/activation.h"
#include "core/train/attention.h"
#include "core/train/vocab.h"

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

// Attention's input projections, in the order q, k, v.
constexpr Matrix kProjections[] = {Matrix::kQuery, Matrix::kKey, Matrix::kValue};

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

void ChipTrainer::Prepare(std::shared_ptr<TeacherTargets> targets, int target_takers) {
  std::vector<bool> owned(c_.num_layers);
  for (int l = 0; l < c_.num_layers; ++l) owned[l] = (l / layers_per_group_) % stages_ == stage_;
  weights_.Init(c_, owned, {d_offset(), d_f_, ti_, mesh_.size(MeshAxisKind::kTensor)});
  // The last stage computes the loss: it makes the targets with the teacher
  // (none with a vocabulary: the targets are token ids).
  if (last_stage()) {
    targets_ = std::move(targets);
    target_takers_ = target_takers;
  }
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
  LocalTensor x = LocalTensor::Allocate({b_mb_, c_.emb_dim});
  if (targets) {
    const TeacherTargets::Rows rows = targets_->Take(step_, first, b_mb_, target_takers_);
    std::memcpy(x.data.get(), rows->data(), rows->size() * sizeof(float));
  } else {
    const std::vector<float> tokens = BatchTokens(c_, step_, first, b_mb_);
    std::memcpy(x.data.get(), tokens.data(), tokens.size() * sizeof(float));
  }
  return SliceBlock(x, 1, tensor, ti_);
}

std::vector<int64_t> ChipTrainer::MicrobatchIds(int m, bool targets) const {
  const int64_t first = m * (c_.global_batch_tokens / c_.num_microbatches) + bi_ * b_mb_;
  std::vector<int64_t> ids = BatchTokenIds(c_, step_, first, b_mb_);
  return targets ? TargetIds(c_, ids) : ids;
}

LocalTensor ChipTrainer::Multiply(const LocalTensor& a, bool at, const LocalTensor& b, bool bt, ComputeKind kind) {
  LocalTensor c = MatMul(a, at, b, bt, *abort_);
  clock_.Compute(kind, MatMulFlops(c, at ? a.shape[0] : a.shape[1]),
                 static_cast<double>(a.elements() + b.elements() + c.elements()) * c_.dtype_bytes);
  return c;
}

void ChipTrainer::ChargeElementwise(int64_t n, double flops, double accesses) {
  clock_.Compute(ComputeKind::kOther, flops * static_cast<double>(n), accesses * static_cast<double>(n) * c_.dtype_bytes);
}

absl::Status ChipTrainer::AddGradient(int l, Matrix m, LocalTensor&& g, bool last) {
  LayerGradients& grads = grads_[l];
  const int k = static_cast<int>(m);
  Accumulate(grads.g[k], std::move(g));
  return last ? ReduceGradient(grads.g[k], AlongD(m) ? 0 : 1, grads.ready[k]) : absl::OkStatus();
}

absl::Status ChipTrainer::ForwardToOut(int use, const LocalTensor& x, Saved& s, LocalTensor* w, LocalTensor* wu) {
  s.xg = x;
  if (auto st = comm_.Collective(CollectiveOp::kAllGather, MeshAxisKind::kTensor, s.xg, 1); !st.ok()) return st;
  if (auto st = fsdp_.Gathered(use, Matrix::kIn, *w); !st.ok()) return st;
  s.grad = Multiply(s.xg, false, *w, false, ComputeKind::kForwardMatmul);
  if (c_.gated_mlp) {
    if (auto st = fsdp_.Gathered(use, Matrix::kUp, *wu); !st.ok()) return st;
    s.u = Multiply(s.xg, false, *wu, false, ComputeKind::kForwardMatmul);
  }
  // The pre-activation becomes the activation's derivative.
  s.a = LocalTensor::Make(s.grad.shape, s.grad.has_values());
  if (s.grad.has_values()) {
    ActivateWithGrad(activation_, s.grad.data.get(), s.grad.elements(), s.a.data.get(), s.grad.data.get());
  }
  ChargeElementwise(s.a.elements(), 1, 2);
  return absl::OkStatus();
}

int64_t ChipTrainer::HeldElements(const Saved& s) const {
  // Charged as a TPU would hold them: the input and the pre-activation (the
  // host's second [B, F] buffer spares it recomputing the activation), and
  // a gated MLP's up-projection; or the input shard alone.
  if (c_.full_remat()) return s.input.elements();
  return s.xg.elements() + s.grad.elements() + (c_.gated_mlp ? s.u.elements() : 0);
}

absl::Status ChipTrainer::LayerForward(int m, int l, LocalTensor& x) {
  if (abort_->aborted()) return abort_->status();
  const int use = fsdp_.NextUse();
  if (l == 0 && c_.embeddings()) {
    if (auto s = Embed(m, use, x); !s.ok()) return s;
  }
  if (c_.attention()) {
    if (auto s = AttentionForward(m, l, use, x); !s.ok()) return s;
  }
  if (auto s = MlpForward(m, l, use, x); !s.ok()) return s;
  return l == c_.num_layers - 1 && c_.embeddings() ? VocabForward(m, use, x) : absl::OkStatus();
}

absl::Status ChipTrainer::LayerBackward(int m, int l, LocalTensor& dx) {
  if (abort_->aborted()) return abort_->status();
  const int use = fsdp_.NextUse();
  // The layer's gradients are complete with its last microbatch: then they
  // are reduced, ahead, while the chip computes on.
  const bool last = ++grads_[l].microbatches == c_.num_microbatches;
  if (l == c_.num_layers - 1 && c_.embeddings()) {
    if (auto s = VocabBackward(m, l, use, last, dx); !s.ok()) return s;
  }
  if (auto s = MlpBackward(m, l, use, last, dx); !s.ok()) return s;
  if (c_.attention()) {
    if (auto s = AttentionBackward(m, l, use, last, dx); !s.ok()) return s;
  }
  return l == 0 && c_.embeddings() ? EmbedBackward(m, l, last, dx) : absl::OkStatus();
}

absl::Status ChipTrainer::Embed(int m, int use, LocalTensor& x) {
  LocalTensor e;  // [V/tensor, D]
  if (auto s = fsdp_.Gathered(use, Matrix::kEmbed, e); !s.ok()) return s;
  const int64_t width = e.shape[0];
  LocalTensor rows = LocalTensor::Make({b_mb_, c_.emb_dim}, e.has_values());
  if (rows.has_values()) {
    const std::vector<int64_t> ids = MicrobatchIds(m, false);
    EmbeddingLookup(e.data.get(), vocab_offset(), width, c_.emb_dim, ids.data(), b_mb_, rows.data.get());
  }
  ChargeElementwise(rows.elements(), 0, 2);  // a gather: each row read and written
  // Each shard has the rows of the ids in its block (zeros elsewhere):
  // summed over tensor, and split along D as activations between blocks are.
  if (auto s = comm_.Collective(CollectiveOp::kReduceScatter, MeshAxisKind::kTensor, rows, 1); !s.ok()) return s;
  x = std::move(rows);
  return absl::OkStatus();
}

absl::Status ChipTrainer::EmbedBackward(int m, int l, bool last, const LocalTensor& dx) {
  LocalTensor dxg = dx;
  if (auto s = comm_.Collective(CollectiveOp::kAllGather, MeshAxisKind::kTensor, dxg, 1); !s.ok()) return s;
  const int64_t width = c_.vocab_size / mesh_.size(MeshAxisKind::kTensor);
  LocalTensor de = LocalTensor::Make({width, c_.emb_dim}, dxg.has_values());  // [V/tensor, D], partial over the batch
  if (de.has_values()) {
    std::fill(de.data.get(), de.data.get() + de.elements(), 0.0f);
    const std::vector<int64_t> ids = MicrobatchIds(m, false);
    EmbeddingGradient(dxg.data.get(), vocab_offset(), width, c_.emb_dim, ids.data(), b_mb_, de.data.get());
  }
  ChargeElementwise(de.elements(), 0, 1);   // zeroed
  ChargeElementwise(dxg.elements(), 1, 3);  // rows added into it
  return AddGradient(l, Matrix::kEmbed, std::move(de), last);
}

absl::Status ChipTrainer::VocabForward(int m, int use, const LocalTensor& x) {
  VocabSaved s;
  s.xg = x;
  if (auto st = comm_.Collective(CollectiveOp::kAllGather, MeshAxisKind::kTensor, s.xg, 1); !st.ok()) return st;
  LocalTensor wv;  // [D, V/tensor]
  if (auto st = fsdp_.Gathered(use, Matrix::kVocab, wv); !st.ok()) return st;
  const LocalTensor logits = Multiply(s.xg, false, wv, false, ComputeKind::kForwardMatmul);  // [B, V/tensor]
  const int64_t width = logits.shape[1];
  const bool values = logits.has_values();
  const std::vector<int64_t> targets = values ? MicrobatchIds(m, true) : std::vector<int64_t>{};
  LocalTensor stats = LocalTensor::Make({b_mb_, kLogitStats}, values);
  if (values) LogitStats(logits.data.get(), b_mb_, width, vocab_offset(), targets.data(), stats.data.get());
  ChargeElementwise(logits.elements(), 3, 1);  // max, exp and sum
  // Every shard's statistics, side by side: each row's log-sum-exp over the whole vocabulary.
  if (auto st = comm_.Collective(CollectiveOp::kAllGather, MeshAxisKind::kTensor, stats, 1); !st.ok()) return st;
  std::vector<float> lse(b_mb_);
  s.dlogits = LocalTensor::Make(logits.shape, values);
  if (values) {
    const double loss = CombineLogitStats(stats.data.get(), b_mb_, mesh_.size(MeshAxisKind::kTensor), lse.data());
    if (ti_ == 0) loss_sum_ += loss;
    LogitGradient(logits.data.get(), b_mb_, width, vocab_offset(), targets.data(), lse.data(),
                  1.0f / static_cast<float>(c_.global_batch_tokens), s.dlogits.data.get());
  }
  ChargeElementwise(logits.elements(), 3, 2);  // exp, scale, subtract
  clock_.HoldActivations(s.xg.elements() + s.dlogits.elements());
  vocab_saved_[m] = std::move(s);
  return absl::OkStatus();
}

absl::Status ChipTrainer::VocabBackward(int m, int l, int use, bool last, LocalTensor& dx) {
  VocabSaved s = std::move(vocab_saved_.at(m));
  vocab_saved_.erase(m);
  clock_.HoldActivations(-(s.xg.elements() + s.dlogits.elements()));
  // [D, V/tensor], partial over the batch
  if (auto st = AddGradient(l, Matrix::kVocab, Multiply(s.xg, true, s.dlogits, false, ComputeKind::kBackwardMatmul),
                            last);
      !st.ok()) {
    return st;
  }
  LocalTensor wv;
  if (auto st = fsdp_.Gathered(use, Matrix::kVocab, wv); !st.ok()) return st;
  LocalTensor dxg = Multiply(s.dlogits, false, wv, true, ComputeKind::kBackwardMatmul);  // [B, D], partial over tensor
  if (auto st = comm_.Collective(CollectiveOp::kReduceScatter, MeshAxisKind::kTensor, dxg, 1); !st.ok()) return st;
  dx = std::move(dxg);
  return absl::OkStatus();
}

absl::Status ChipTrainer::AttentionToOut(int use, const LocalTensor& x, AttentionSaved& s, LocalTensor* w) {
  s.xg = x;
  if (auto st = comm_.Collective(CollectiveOp::kAllGather, MeshAxisKind::kTensor, s.xg, 1); !st.ok()) return st;
  LocalTensor* outs[] = {&s.q, &s.k, &s.v};
  for (int i = 0; i < 3; ++i) {
    if (auto st = fsdp_.Gathered(use, kProjections[i], w[i]); !st.ok()) return st;
    *outs[i] = Multiply(s.xg, false, w[i], false, ComputeKind::kForwardMatmul);
  }
  const AttentionShape shape = AttentionOf(c_, b_mb_, mesh_.size(MeshAxisKind::kTensor));
  const bool values = s.q.has_values();
  s.p = LocalTensor::Make({shape.prob_elements()}, values);
  s.o = LocalTensor::Make({b_mb_, shape.q_width()}, values);
  if (values) tpuemu::AttentionForward(shape, s.q.data.get(), s.k.data.get(), s.v.data.get(), s.p.data.get(), s.o.data.get());
  // q k^T and p v on the matrix unit; the softmax (scale, max, exp, sum,
  // divide) elementwise.
  clock_.Compute(ComputeKind::kForwardMatmul, shape.ForwardFlops(),
                 static_cast<double>(s.q.elements() + s.k.elements() + s.v.elements() + s.o.elements() +
                                     2 * s.p.elements()) * c_.dtype_bytes);
  ChargeElementwise(s.p.elements(), 5, 2);
  return absl::OkStatus();
}

int64_t ChipTrainer::HeldElements(const AttentionSaved& s) const {
  if (c_.full_remat()) return s.input.elements();
  return s.xg.elements() + s.q.elements() + s.k.elements() + s.v.elements() + s.p.elements() + s.o.elements();
}

absl::Status ChipTrainer::AttentionForward(int m, int l, int use, LocalTensor& x) {
  AttentionSaved s;
  LocalTensor w[3];
  if (auto st = AttentionToOut(use, x, s, w); !st.ok()) return st;
  LocalTensor wo;
  if (auto st = fsdp_.Gathered(use, Matrix::kAttnOut, wo); !st.ok()) return st;
  LocalTensor out = Multiply(s.o, false, wo, false, ComputeKind::kForwardMatmul);  // [B, D], partial over tensor
  if (auto st = comm_.Collective(CollectiveOp::kReduceScatter, MeshAxisKind::kTensor, out, 1); !st.ok()) return st;
  if (c_.full_remat()) {
    s = {};
    s.input = std::move(x);
  }
  clock_.HoldActivations(HeldElements(s));
  attention_saved_[{m, l}] = std::move(s);
  x = std::move(out);
  return absl::OkStatus();
}

absl::Status ChipTrainer::AttentionBackward(int m, int l, int use, bool last, LocalTensor& dx) {
  AttentionSaved s = std::move(attention_saved_.at({m, l}));
  attention_saved_.erase({m, l});
  clock_.HoldActivations(-HeldElements(s));
  LocalTensor w[3];  // the gathered Wq, Wk, Wv
  if (c_.full_remat()) {
    const LocalTensor input = std::move(s.input);
    if (auto st = AttentionToOut(use, input, s, w); !st.ok()) return st;
  }
  LocalTensor dog = dx;
  if (auto st = comm_.Collective(CollectiveOp::kAllGather, MeshAxisKind::kTensor, dog, 1); !st.ok()) return st;
  if (auto st = AddGradient(l, Matrix::kAttnOut, Multiply(s.o, true, dog, false, ComputeKind::kBackwardMatmul), last);
      !st.ok()) {
    return st;
  }
  LocalTensor wo;
  if (auto st = fsdp_.Gathered(use, Matrix::kAttnOut, wo); !st.ok()) return st;
  const LocalTensor d_o = Multiply(dog, false, wo, true, ComputeKind::kBackwardMatmul);  // [B, N H / tensor]
  const AttentionShape shape = AttentionOf(c_, b_mb_, mesh_.size(MeshAxisKind::kTensor));
  const bool values = d_o.has_values();
  LocalTensor grads[] = {LocalTensor::Make(s.q.shape, values), LocalTensor::Make(s.k.shape, values),
                         LocalTensor::Make(s.v.shape, values)};
  if (values) {
    tpuemu::AttentionBackward(shape, s.q.data.get(), s.k.data.get(), s.v.data.get(), s.p.data.get(), d_o.data.get(),
                              grads[0].data.get(), grads[1].data.get(), grads[2].data.get());
  }
  clock_.Compute(ComputeKind::kBackwardMatmul, 2 * shape.ForwardFlops(),
                 static_cast<double>(2 * (s.q.elements() + s.k.elements() + s.v.elements()) + d_o.elements() +
                                     3 * s.p.elements()) * c_.dtype_bytes);
  ChargeElementwise(s.p.elements(), 4, 3);
  LocalTensor dxg;  // [B, D], partial over tensor
  for (int i = 0; i < 3; ++i) {
    if (auto st = AddGradient(l, kProjections[i], Multiply(s.xg, true, grads[i], false, ComputeKind::kBackwardMatmul),
                              last);
        !st.ok()) {
      return st;
    }
    if (!c_.full_remat()) {
      if (auto st = fsdp_.Gathered(use, kProjections[i], w[i]); !st.ok()) return st;
    }
    Accumulate(dxg, Multiply(grads[i], false, w[i], true, ComputeKind::kBackwardMatmul));
  }
  if (auto st = comm_.Collective(CollectiveOp::kReduceScatter, MeshAxisKind::kTensor, dxg, 1); !st.ok()) return st;
  dx = std::move(dxg);
  return absl::OkStatus();
}

absl::Status ChipTrainer::MlpForward(int m, int l, int use, LocalTensor& x) {
  Saved s;
  LocalTensor w, wu;
  if (auto st = ForwardToOut(use, x, s, &w, &wu); !st.ok()) return st;
  LocalTensor gated = c_.gated_mlp ? Gated(s.a, s.u) : s.a;  // Wout's input
  LocalTensor wo;
  if (auto st = fsdp_.Gathered(use, Matrix::kOut, wo); !st.ok()) return st;
  LocalTensor out = Multiply(gated, false, wo, false, ComputeKind::kForwardMatmul);
  if (auto st = comm_.Collective(CollectiveOp::kReduceScatter, MeshAxisKind::kTensor, out, 1); !st.ok()) return st;
  if (c_.full_remat()) {
    s = {};
    s.input = std::move(x);
  }
  clock_.HoldActivations(HeldElements(s));
  saved_[{m, l}] = std::move(s);
  x = std::move(out);
  return absl::OkStatus();
}

LocalTensor ChipTrainer::Gated(const LocalTensor& a, const LocalTensor& u) {
  LocalTensor g = LocalTensor::Make(a.shape, a.has_values());
  const int64_t n = g.has_values() ? g.elements() : 0;
  for (int64_t i = 0; i < n; ++i) g.data[i] = a.data[i] * u.data[i];
  ChargeElementwise(g.elements(), 1, 3);
  return g;
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
  ChargeElementwise(x.elements(), 3, 3);
  return dx;
}

void ChipTrainer::Accumulate(LocalTensor& sum, LocalTensor&& g) {
  if (sum.shape.empty()) {
    sum = std::move(g);
    return;
  }
  const int64_t n = sum.has_values() ? g.elements() : 0;
  for (int64_t i = 0; i < n; ++i) sum.data[i] += g.data[i];
  ChargeElementwise(g.elements(), 1, 3);
}

absl::Status ChipTrainer::MlpBackward(int m, int l, int use, bool last, LocalTensor& dx) {
  Saved saved = std::move(saved_.at({m, l}));
  saved_.erase({m, l});
  clock_.HoldActivations(-HeldElements(saved));
  LocalTensor w, wu;  // the gathered Win and Wup, when the forward is made again
  if (c_.full_remat()) {
    // The forward again, from the input shard: gathered over tensor, the
    // up-projections and the activation (charged as forward work).
    const LocalTensor input = std::move(saved.input);
    if (auto s = ForwardToOut(use, input, saved, &w, &wu); !s.ok()) return s;
  } else {
    // The emulated chip recomputes the activation (charged); the host kept it.
    ChargeElementwise(saved.a.elements(), 1, 2);
  }
  LocalTensor dog = dx;
  if (auto s = comm_.Collective(CollectiveOp::kAllGather, MeshAxisKind::kTensor, dog, 1); !s.ok()) return s;
  const LocalTensor& a = saved.a;
  const LocalTensor gated = c_.gated_mlp ? Gated(a, saved.u) : a;  // Wout's input, again
  // [F_t, D], partial over the batch
  if (auto s = AddGradient(l, Matrix::kOut, Multiply(gated, true, dog, false, ComputeKind::kBackwardMatmul), last);
      !s.ok()) {
    return s;
  }
  LocalTensor wo;
  if (auto s = fsdp_.Gathered(use, Matrix::kOut, wo); !s.ok()) return s;
  LocalTensor dh = Multiply(dog, false, wo, true, ComputeKind::kBackwardMatmul);  // [B, F_t]: dA, then dH
  LocalTensor du;  // a gated MLP's: dA * A
  if (c_.gated_mlp) {
    du = LocalTensor::Make(dh.shape, dh.has_values());
    const int64_t n = dh.has_values() ? dh.elements() : 0;
    for (int64_t i = 0; i < n; ++i) {
      du.data[i] = dh.data[i] * a.data[i];
      dh.data[i] = dh.data[i] * saved.u.data[i] * saved.grad.data[i];
    }
    ChargeElementwise(dh.elements(), 3, 5);
  } else {
    const int64_t n = dh.has_values() ? dh.elements() : 0;
    for (int64_t i = 0; i < n; ++i) dh.data[i] *= saved.grad.data[i];
    ChargeElementwise(dh.elements(), 2, 3);
  }
  // [D, F_t], partial over the batch
  if (auto s = AddGradient(l, Matrix::kIn, Multiply(saved.xg, true, dh, false, ComputeKind::kBackwardMatmul), last);
      !s.ok()) {
    return s;
  }
  if (c_.gated_mlp) {
    if (auto s = AddGradient(l, Matrix::kUp, Multiply(saved.xg, true, du, false, ComputeKind::kBackwardMatmul), last);
        !s.ok()) {
      return s;
    }
  }
  // The first layer's input gradient reaches nothing unless attention or
  // the embedding reads it or tensor shards sum it (group 0 sends none back):
  // one backward multiply in 16 of a 4-layer model. The emulated chip is
  // charged for it as before, with the gathers it waits on, but the host
  // does not make it.
  const bool dx_unread = l == 0 && !c_.first_mlp_input_gradient_read() && mesh_.size(MeshAxisKind::kTensor) == 1;
  const LocalTensor no_values = LocalTensor::ShapeOnly(dh.shape);
  if (!c_.full_remat()) {
    if (auto s = fsdp_.Gathered(use, Matrix::kIn, w); !s.ok()) return s;
  }
  // [B, D], partial over tensor
  LocalTensor dxg = Multiply(dx_unread ? no_values : dh, false, w, true, ComputeKind::kBackwardMatmul);
  if (c_.gated_mlp) {
    if (!c_.full_remat()) {
      if (auto s = fsdp_.Gathered(use, Matrix::kUp, wu); !s.ok()) return s;
    }
    Accumulate(dxg, Multiply(dx_unread ? no_values : du, false, wu, true, ComputeKind::kBackwardMatmul));
  }
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
    // With a vocabulary the first layer embeds the tokens.
    if (!c_.embeddings()) x = MicrobatchTokens(op.microbatch, false);
  } else {
    x = LocalTensor::Make({b_mb_, d_t_}, !c_.shape_only());
    if (auto s = stage_links_.Receive(true, op, group, x); !s.ok()) return s;
  }
  const double start = clock_.now();
  for (int l = first_layer(group); l < first_layer(group + 1); ++l) {
    if (auto s = LayerForward(op.microbatch, l, x); !s.ok()) return s;
  }
  if (group == groups - 1) {
    // With a vocabulary the last layer made the loss and kept its gradient.
    if (!c_.embeddings()) loss_grad_[op.microbatch] = Loss(op.microbatch, x);
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
    // With a vocabulary the last layer starts from what its loss kept.
    if (!c_.embeddings()) {
      dx = std::move(loss_grad_.at(op.microbatch));
      loss_grad_.erase(op.microbatch);
    }
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
  attention_saved_.clear();
  vocab_saved_.clear();
  loss_grad_.clear();
  loss_sum_ = 0;
  const int layers = c_.num_layers;
  grads_.assign(layers, LayerGradients{});

  const std::vector<PipelineOp> schedule =
      StageSchedule(c_.pipeline_schedule, stages_, stage_, c_.num_microbatches, c_.pipeline_repeats);
  std::vector<WeightUse> weight_uses;  // in order
  for (const PipelineOp& op : schedule) {
    const int first = first_layer(op.group(stages_, stage_));
    for (int j = 0; j < layers_per_group_; ++j) {
      weight_uses.push_back({op.forward ? first + j : first + layers_per_group_ - 1 - j, op.forward});
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
    double ready = 0;
    for (double r : grads.ready) ready = std::max(ready, r);
    clock_.Wait(mesh_.size(MeshAxisKind::kData) > 1 ? MeshAxisKind::kData : MeshAxisKind::kFsdp, ready,
                "reduced gradients");
    for (Matrix m : {Matrix::kVocab, Matrix::kOut, Matrix::kIn, Matrix::kUp, Matrix::kAttnOut, Matrix::kQuery,
                     Matrix::kKey, Matrix::kValue, Matrix::kEmbed}) {
      if (grads.g[static_cast<int>(m)].shape.empty()) continue;  // not in this block
      const ElementwiseCost cost = weights_.Update(l, m, grads.g[static_cast<int>(m)], step + 1);
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
