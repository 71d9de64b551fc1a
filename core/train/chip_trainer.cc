#include "core/train/chip_trainer.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/tensor/gemm.h"
#include "core/pod/link_clock.h"
#include "core/train/permute.h"
#include "core/collective/tensor_collective.h"
#include "core/train/model.h"

namespace tpuemu {
namespace {

// c = op(a) * op(b) for two matrices held as tensors; partial once `abort` is set.
LocalTensor MatMul(const LocalTensor& a, bool at, const LocalTensor& b, bool bt, const JobAbort& abort) {
  LocalTensor c = LocalTensor::Allocate({at ? a.shape[1] : a.shape[0], bt ? b.shape[0] : b.shape[1]});
  tpuemu::MatMul(a.data.get(), a.shape[0], a.shape[1], at, b.data.get(), b.shape[0], b.shape[1], bt, c.data.get(),
                 &abort);
  return c;
}

double MatMulFlops(const LocalTensor& c, int64_t k) { return 2.0 * static_cast<double>(c.elements()) * k; }

// Chunk tags: 11 bits of collective number above the collective's own step.
constexpr int kTagShift = 52;
constexpr int kCollectiveTags = 2047;

}  // namespace

ChipTrainer::ChipTrainer(const TrainConfig& config, const TrainMesh& mesh, int chip, HostNetwork& net, uint64_t job,
                         std::shared_ptr<JobAbort> abort)
    : c_(config), mesh_(mesh), chip_(chip), net_(net), job_(job), abort_(std::move(abort)) {
  const int data = mesh.size(MeshAxisKind::kData), fsdp = mesh.size(MeshAxisKind::kFsdp),
            tensor = mesh.size(MeshAxisKind::kTensor);
  b_ = c_.global_batch_tokens / (data * fsdp);
  b_mb_ = b_ / c_.num_microbatches;
  d_f_ = c_.emb_dim / fsdp;
  f_t_ = c_.mlp_dim / tensor;
  d_t_ = c_.emb_dim / tensor;
  bi_ = mesh.BatchIndex(chip);
  fi_ = mesh.Index(chip, MeshAxisKind::kFsdp);
  ti_ = mesh.Index(chip, MeshAxisKind::kTensor);
  stages_ = mesh.stages();
  stage_ = mesh.Stage(chip);
  layers_per_group_ = c_.num_layers / (stages_ * c_.pipeline_repeats);
  if (stages_ > 1) {
    previous_stage_ = mesh.StageNeighbor(chip, -1);
    next_stage_ = mesh.StageNeighbor(chip, +1);
  }
}

void ChipTrainer::Prepare() {
  std::vector<bool> owned(c_.num_layers);
  for (int l = 0; l < c_.num_layers; ++l) owned[l] = (l / layers_per_group_) % stages_ == stage_;
  weights_.Init(c_, owned, {d_offset(), d_f_, f_offset(), f_t_});
  // The last stage computes the loss: it makes the targets with the teacher.
  if (stage_ == stages_ - 1) teacher_ = InitWeights(c_, WeightStream::kTeacher);
}

const CollectivePlan* ChipTrainer::PlanFor(CollectiveOp op, MeshAxisKind axis, uint64_t elements) {
  auto [it, fresh] = plans_.try_emplace({static_cast<int>(op), static_cast<int>(axis), elements});
  std::unique_ptr<CollectivePlan>& slot = it->second;
  if (fresh) {
    CollectiveSpec spec;
    spec.op = op;
    spec.axes = mesh_.axes(axis);
    spec.bytes = elements * c_.dtype_bytes;
    spec.dtype_bytes = c_.dtype_bytes;
    spec.chunk_bytes = 1 << 20;
    auto plan = CollectivePlan::Create(net_.topology(), spec);
    if (plan.ok()) slot = std::make_unique<CollectivePlan>(*std::move(plan));
  }
  return slot.get();
}

RunOptions ChipTrainer::Options() {
  RunOptions options;
  options.job = job_;
  options.abort = abort_;
  options.trace = &result_.trace;
  options.wire_bf16 = c_.wire_dtype_bytes == 2;
  return options;
}

absl::Status ChipTrainer::Collective(CollectiveOp op, MeshAxisKind axis, LocalTensor& t, int dim, double* ready) {
  const int n = mesh_.size(axis);
  const double start = ready != nullptr ? std::max(now_, *ready) : now_;
  if (ready != nullptr) *ready = start;
  if (n == 1) return absl::OkStatus();
  const int64_t local = t.elements();
  const uint64_t elements = static_cast<uint64_t>(op == CollectiveOp::kAllGather ? local * n : local);
  const CollectivePlan* found = PlanFor(op, axis, elements);
  if (found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        c_.name, ": a ", OpName(op), " over ", MeshAxisName(axis), " of ", elements,
        " elements cannot split evenly over its chips and axis parts; use sizes with more factors of 2"));
  }
  RunOptions options = Options();
  // Numbers wrap long after a collective's chunks are all delivered; tags
  // never reach the permutes' top bit.
  options.tag_base = static_cast<uint64_t>(1 + collectives_++ % kCollectiveTags) << kTagShift;
  uint64_t sent_before = 0;
  for (const auto& [_, link] : links_) sent_before += static_cast<uint64_t>(link.bytes_sent());
  auto report = RunTensorCollective(*found, chip_, net_, options, &links_, start, t, dim);
  if (!report.ok()) return report.status();
  wall_mark_ = WallClock::now();
  uint64_t sent_after = 0;
  for (const auto& [_, link] : links_) sent_after += static_cast<uint64_t>(link.bytes_sent());
  const int k = static_cast<int>(axis);
  result_.mesh_bytes[k] += sent_after - sent_before;
  busy_[k].push_back({start, report->emulated_s});
  result_.trace.push_back({Track(), absl::StrCat(OpName(op), " ", MeshAxisName(axis), ready != nullptr ? " (ahead)" : ""),
                           start, report->emulated_s, sent_after - sent_before});
  if (ready != nullptr) {
    *ready = report->emulated_s;  // issued ahead: the chip carries on meanwhile
  } else {
    result_.mesh_comm_s[k] += report->emulated_s - now_;
    now_ = report->emulated_s;
  }
  return absl::OkStatus();
}

uint64_t ChipTrainer::PermuteTag(bool forward, const PipelineOp& op, int group) const {
  // Direction in bit 62, microbatch (at most 65536) in bits 44-61, group (at
  // most num_layers <= 1e6) in 24-43, the chunk in the low 24 bits.
  return kPermuteTagBit | (forward ? 0 : uint64_t{1} << 62) | (static_cast<uint64_t>(op.microbatch) << 44) |
         (static_cast<uint64_t>(group) << 24);
}

absl::Status ChipTrainer::SendToStage(bool forward, const PipelineOp& op, int group, const LocalTensor& t) {
  const StageLink& to = forward ? next_stage_ : previous_stage_;
  auto arrival = PermuteSend(net_, links_, Options(), chip_, to.peer, to.axis, to.dir, PermuteTag(forward, op, group),
                             t, c_.dtype_bytes, now_);
  if (!arrival.ok()) return arrival.status();
  const int k = static_cast<int>(MeshAxisKind::kPipeline);
  result_.mesh_bytes[k] += static_cast<uint64_t>(t.elements()) * c_.dtype_bytes;
  busy_[k].push_back({now_, *arrival});
  return absl::OkStatus();
}

absl::Status ChipTrainer::ReceiveFromStage(bool forward, const PipelineOp& op, int group, LocalTensor& t) {
  const StageLink& from = forward ? previous_stage_ : next_stage_;
  auto arrival = PermuteReceive(net_, Options(), chip_, from.peer, PermuteTag(forward, op, group), t);
  if (!arrival.ok()) return arrival.status();
  wall_mark_ = WallClock::now();
  if (*arrival > now_) pipeline_wait_s_ += *arrival - now_;
  Wait(MeshAxisKind::kPipeline, *arrival,
       absl::StrCat("stage ", mesh_.Stage(from.peer), ": ", forward ? "activations" : "gradients", " of mb ",
                    op.microbatch));
  return absl::OkStatus();
}

absl::Status ChipTrainer::ReduceGradient(LocalTensor& g, int d_dim, double& ready) {
  ready = now_;
  if (auto s = Collective(CollectiveOp::kReduceScatter, MeshAxisKind::kFsdp, g, d_dim, &ready); !s.ok()) return s;
  return Collective(CollectiveOp::kAllReduce, MeshAxisKind::kData, g, 0, &ready);
}

void ChipTrainer::WaitForGradient(double ready) {
  Wait(mesh_.size(MeshAxisKind::kData) > 1 ? MeshAxisKind::kData : MeshAxisKind::kFsdp, ready, "reduced gradients");
}

void ChipTrainer::IssueGathers(int layer, Ahead& a) {
  a.win = weights_.win(layer);
  a.wout = weights_.wout(layer);
  a.status = Collective(CollectiveOp::kAllGather, MeshAxisKind::kFsdp, a.win, 0, &a.in_ready);
  if (a.status.ok()) a.status = Collective(CollectiveOp::kAllGather, MeshAxisKind::kFsdp, a.wout, 1, &a.out_ready);
}

ChipTrainer::Ahead& ChipTrainer::Current(int use) {
  for (auto it = ahead_.begin(); it != ahead_.end() && it->first < use;) it = ahead_.erase(it);
  for (int u : {use, use + 1}) {
    if (u < static_cast<int>(weight_uses_.size()) && !ahead_.count(u)) IssueGathers(weight_uses_[u], ahead_[u]);
  }
  return ahead_[use];
}

absl::Status ChipTrainer::GatheredWeight(int use, bool in, LocalTensor& out) {
  const int layer = weight_uses_[use];
  if (!gathered_once_.empty()) {
    const Ahead& a = gathered_once_.at(layer);
    Wait(MeshAxisKind::kFsdp, in ? a.in_ready : a.out_ready, "weights gathered once per step");
    out = in ? a.win : a.wout;
    return absl::OkStatus();
  }
  if (!c_.fsdp_prefetch) {
    out = in ? weights_.win(layer) : weights_.wout(layer);
    return Collective(CollectiveOp::kAllGather, MeshAxisKind::kFsdp, out, in ? 0 : 1);
  }
  Ahead& a = Current(use);
  if (!a.status.ok()) return a.status;
  Wait(MeshAxisKind::kFsdp, in ? a.in_ready : a.out_ready, "prefetched weights");
  out = in ? a.win : a.wout;
  return absl::OkStatus();
}

absl::Status ChipTrainer::GatherOnce() {
  // Issued back to back at the step's start, in the order of first use; the
  // chip waits for each at that use.
  for (int layer : weight_uses_) {
    if (gathered_once_.count(layer)) continue;
    Ahead& a = gathered_once_[layer];
    IssueGathers(layer, a);
    if (!a.status.ok()) return a.status;
  }
  return absl::OkStatus();
}

std::string ChipTrainer::Track() const { return absl::StrCat("chip ", chip_); }

void ChipTrainer::Wait(MeshAxisKind axis, double until, const std::string& what) {
  if (until <= now_) return;
  result_.mesh_comm_s[static_cast<int>(axis)] += until - now_;
  result_.trace.push_back({Track(), absl::StrCat("wait: ", what), now_, until, 0});
  now_ = until;
}

void ChipTrainer::Compute(ComputeKind kind, double flops, double hbm_bytes) {
  static const char* kNames[] = {"forward matmul", "backward matmul", "elementwise"};
  const double dt = RooflineSeconds(net_.topology().profile(), flops, hbm_bytes);
  result_.trace.push_back({Track(), kNames[static_cast<int>(kind)], now_, now_ + dt, 0});
  // Paced: the op (computed since the last mark) takes at least dt stretched.
  const double scale = net_.time_scale();
  if (scale > 0) {
    abort_->SleepUntil(wall_mark_ +
                       std::chrono::duration_cast<WallClock::duration>(std::chrono::duration<double>(dt * scale)));
  }
  wall_mark_ = WallClock::now();
  now_ += dt;
  result_.compute_s += dt;
  result_.compute_parts_s[static_cast<int>(kind)] += dt;
}

void ChipTrainer::HoldActivations(int64_t elements) {
  activation_elements_ += elements;
  result_.peak_activation_bytes = std::max<uint64_t>(
      result_.peak_activation_bytes, static_cast<uint64_t>(activation_elements_) * c_.dtype_bytes);
}

LocalTensor ChipTrainer::MicrobatchTokens(int m, bool targets) const {
  // Microbatch m is rows [m B/M, (m+1) B/M) of the global batch; the chip
  // has its batch shard's share of them.
  const int64_t first = m * (c_.global_batch_tokens / c_.num_microbatches) + bi_ * b_mb_;
  std::vector<float> tokens = BatchTokens(c_, step_, first, b_mb_);
  if (targets) ForwardPass(c_, teacher_, tokens);
  LocalTensor x = LocalTensor::Allocate({b_mb_, c_.emb_dim});
  std::memcpy(x.data.get(), tokens.data(), tokens.size() * sizeof(float));
  return SliceBlock(x, 1, mesh_.size(MeshAxisKind::kTensor), ti_);
}

absl::Status ChipTrainer::LayerForward(int m, int l, LocalTensor& x) {
  if (abort_->aborted()) return abort_->status();
  const int use = next_use_++;
  const double bytes = c_.dtype_bytes;
  LocalTensor xg = x;
  if (auto s = Collective(CollectiveOp::kAllGather, MeshAxisKind::kTensor, xg, 1); !s.ok()) return s;
  LocalTensor w;
  if (auto s = GatheredWeight(use, true, w); !s.ok()) return s;
  LocalTensor h = MatMul(xg, false, w, false, *abort_);
  Compute(ComputeKind::kForwardMatmul, MatMulFlops(h, c_.emb_dim), (xg.elements() + w.elements() + h.elements()) * bytes);
  LocalTensor a = LocalTensor::Allocate(h.shape);
  for (int64_t i = 0; i < a.elements(); ++i) a.data[i] = Activate(c_.activation, h.data[i]);
  Compute(ComputeKind::kOther, static_cast<double>(a.elements()), 2.0 * a.elements() * bytes);
  LocalTensor wo;
  if (auto s = GatheredWeight(use, false, wo); !s.ok()) return s;
  LocalTensor out = MatMul(a, false, wo, false, *abort_);
  Compute(ComputeKind::kForwardMatmul, MatMulFlops(out, f_t_), (a.elements() + wo.elements() + out.elements()) * bytes);
  if (auto s = Collective(CollectiveOp::kReduceScatter, MeshAxisKind::kTensor, out, 1); !s.ok()) return s;
  HoldActivations(xg.elements() + h.elements());
  saved_[{m, l}] = {std::move(xg), std::move(h)};
  x = std::move(out);
  return absl::OkStatus();
}

LocalTensor ChipTrainer::Loss(int m, const LocalTensor& x) {
  // The chip's block of the mean squared error; its gradient is that of the
  // mean over the whole batch.
  const LocalTensor y = MicrobatchTokens(m, true);
  LocalTensor dx = LocalTensor::Allocate(x.shape);
  const double scale = 1.0 / static_cast<double>(c_.global_batch_tokens * c_.emb_dim);
  for (int64_t i = 0; i < x.elements(); ++i) {
    const double e = static_cast<double>(x.data[i]) - y.data[i];
    result_.loss_sum += e * e;
    dx.data[i] = static_cast<float>(2 * e * scale);
  }
  Compute(ComputeKind::kOther, 3.0 * x.elements(), 3.0 * x.elements() * c_.dtype_bytes);
  return dx;
}

void ChipTrainer::Accumulate(LocalTensor& sum, LocalTensor&& g) {
  if (sum.data == nullptr) {
    sum = std::move(g);
    return;
  }
  for (int64_t i = 0; i < g.elements(); ++i) sum.data[i] += g.data[i];
  Compute(ComputeKind::kOther, static_cast<double>(g.elements()), 3.0 * g.elements() * c_.dtype_bytes);
}

absl::Status ChipTrainer::LayerBackward(int m, int l, LocalTensor& dx) {
  if (abort_->aborted()) return abort_->status();
  const int use = next_use_++;
  const double bytes = c_.dtype_bytes;
  Saved saved = std::move(saved_.at({m, l}));
  saved_.erase({m, l});
  HoldActivations(-(saved.xg.elements() + saved.h.elements()));
  // The layer's gradients are complete with its last microbatch: then they
  // are reduced, ahead, while the chip computes on.
  const bool last = ++grads_in_[l] == c_.num_microbatches;
  LocalTensor dog = dx;
  if (auto s = Collective(CollectiveOp::kAllGather, MeshAxisKind::kTensor, dog, 1); !s.ok()) return s;
  LocalTensor a = LocalTensor::Allocate(saved.h.shape);
  for (int64_t i = 0; i < a.elements(); ++i) a.data[i] = Activate(c_.activation, saved.h.data[i]);
  Compute(ComputeKind::kOther, static_cast<double>(a.elements()), 2.0 * a.elements() * bytes);
  LocalTensor dwout = MatMul(a, true, dog, false, *abort_);  // [F_t, D], partial over the batch
  Compute(ComputeKind::kBackwardMatmul, MatMulFlops(dwout, b_mb_), (a.elements() + dog.elements() + dwout.elements()) * bytes);
  Accumulate(dwouts_[l], std::move(dwout));
  if (last) {
    if (auto s = ReduceGradient(dwouts_[l], 1, grad_ready_out_[l]); !s.ok()) return s;
  }
  LocalTensor wo;
  if (auto s = GatheredWeight(use, false, wo); !s.ok()) return s;
  LocalTensor dh = MatMul(dog, false, wo, true, *abort_);  // [B, F_t]
  Compute(ComputeKind::kBackwardMatmul, MatMulFlops(dh, c_.emb_dim), (dog.elements() + wo.elements() + dh.elements()) * bytes);
  for (int64_t i = 0; i < dh.elements(); ++i) dh.data[i] *= ActivateGrad(c_.activation, saved.h.data[i]);
  Compute(ComputeKind::kOther, 2.0 * dh.elements(), 3.0 * dh.elements() * bytes);
  LocalTensor dwin = MatMul(saved.xg, true, dh, false, *abort_);  // [D, F_t], partial over the batch
  Compute(ComputeKind::kBackwardMatmul, MatMulFlops(dwin, b_mb_), (saved.xg.elements() + dh.elements() + dwin.elements()) * bytes);
  Accumulate(dwins_[l], std::move(dwin));
  if (last) {
    if (auto s = ReduceGradient(dwins_[l], 0, grad_ready_in_[l]); !s.ok()) return s;
  }
  LocalTensor w;
  if (auto s = GatheredWeight(use, true, w); !s.ok()) return s;
  LocalTensor dxg = MatMul(dh, false, w, true, *abort_);  // [B, D], partial over tensor
  Compute(ComputeKind::kBackwardMatmul, MatMulFlops(dxg, f_t_), (dh.elements() + w.elements() + dxg.elements()) * bytes);
  if (auto s = Collective(CollectiveOp::kReduceScatter, MeshAxisKind::kTensor, dxg, 1); !s.ok()) return s;
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
    x = LocalTensor::Allocate({b_mb_, d_t_});
    if (auto s = ReceiveFromStage(true, op, group, x); !s.ok()) return s;
  }
  const double start = now_;
  for (int l = first_layer(group); l < first_layer(group + 1); ++l) {
    if (auto s = LayerForward(op.microbatch, l, x); !s.ok()) return s;
  }
  if (group == groups - 1) {
    loss_grad_[op.microbatch] = Loss(op.microbatch, x);
  } else if (auto s = SendToStage(true, op, group + 1, x); !s.ok()) {
    return s;
  }
  result_.trace.push_back({Track(), SpanName(op, group), start, now_, 0});
  return absl::OkStatus();
}

absl::Status ChipTrainer::Backward(const PipelineOp& op) {
  const int group = op.group(stages_, stage_), groups = stages_ * c_.pipeline_repeats;
  LocalTensor dx;
  if (group == groups - 1) {
    dx = std::move(loss_grad_.at(op.microbatch));
    loss_grad_.erase(op.microbatch);
  } else {
    dx = LocalTensor::Allocate({b_mb_, d_t_});
    if (auto s = ReceiveFromStage(false, op, group, dx); !s.ok()) return s;
  }
  const double start = now_;
  for (int l = first_layer(group + 1) - 1; l >= first_layer(group); --l) {
    if (auto s = LayerBackward(op.microbatch, l, dx); !s.ok()) return s;
  }
  if (group > 0) {
    if (auto s = SendToStage(false, op, group - 1, dx); !s.ok()) return s;
  }
  result_.trace.push_back({Track(), SpanName(op, group), start, now_, 0});
  return absl::OkStatus();
}

absl::StatusOr<ChipRunResult> ChipTrainer::Step(int step) {
  const auto wall_start = WallClock::now();
  wall_mark_ = wall_start;
  result_ = ChipRunResult{};
  result_.chip = chip_;
  result_.step = step;
  step_ = step;
  links_.clear();
  ahead_.clear();
  gathered_once_.clear();
  saved_.clear();
  loss_grad_.clear();
  for (auto& b : busy_) b.clear();
  now_ = 0;
  collectives_ = 0;
  activation_elements_ = 0;
  pipeline_wait_s_ = 0;
  const int layers = c_.num_layers;
  dwins_.assign(layers, LocalTensor{});
  dwouts_.assign(layers, LocalTensor{});
  grads_in_.assign(layers, 0);
  grad_ready_in_.assign(layers, 0);
  grad_ready_out_.assign(layers, 0);

  const std::vector<PipelineOp> schedule =
      StageSchedule(c_.pipeline_schedule, stages_, stage_, c_.num_microbatches, c_.pipeline_repeats);
  weight_uses_.clear();
  for (const PipelineOp& op : schedule) {
    const int first = first_layer(op.group(stages_, stage_));
    for (int j = 0; j < layers_per_group_; ++j) weight_uses_.push_back(op.forward ? first + j : first + layers_per_group_ - 1 - j);
  }
  next_use_ = 0;
  if (c_.pipeline_fsdp_ag_once && mesh_.size(MeshAxisKind::kFsdp) > 1) {
    if (auto s = GatherOnce(); !s.ok()) return s;
  }

  // The stage's microbatches, in its schedule's order.
  for (const PipelineOp& op : schedule) {
    if (auto s = op.forward ? Forward(op) : Backward(op); !s.ok()) return s;
  }
  result_.pipeline_end_s = now_;
  result_.pipeline_busy_s = now_ - pipeline_wait_s_;
  // The optimizer step, once each layer's reduced gradients are in.
  for (int l = layers - 1; l >= 0; --l) {
    if (!owns(l)) continue;
    WaitForGradient(std::max(grad_ready_out_[l], grad_ready_in_[l]));
    for (bool in : {false, true}) {
      const ElementwiseCost cost = weights_.Update(l, in, in ? dwins_[l] : dwouts_[l], step + 1);
      Compute(ComputeKind::kOther, cost.flops, cost.hbm_bytes);
    }
  }
  dwins_.clear();
  dwouts_.clear();

  result_.emulated_s = now_;
  for (int k = 0; k < kMeshAxes; ++k) {
    // The union of the axis' transfer intervals: its links' busy time,
    // however much of it the chip's compute hid.
    std::sort(busy_[k].begin(), busy_[k].end());
    double end = 0;
    for (const auto& [from, to] : busy_[k]) {
      result_.mesh_busy_s[k] += std::max(0.0, to - std::max(from, end));
      end = std::max(end, to);
    }
  }
  for (const auto& [key, link] : links_) {
    const Axis axis = static_cast<Axis>(key.first);
    result_.links.push_back({chip_, *net_.topology().Neighbor(chip_, axis, key.second), axis, key.second,
                             static_cast<uint64_t>(link.bytes_sent())});
  }
  result_.wall_s = std::chrono::duration<double>(WallClock::now() - wall_start).count();
  const double time_scale = net_.time_scale();
  if (time_scale > 0) result_.host_lag_s = std::max(0.0, result_.wall_s - now_ * time_scale);
  return result_;
}

double ChipTrainer::ParamSquares() const {
  // Shards are replicated over the data axis: count one replica. Stages
  // hold different layers.
  return mesh_.Index(chip_, MeshAxisKind::kData) != 0 ? 0 : weights_.SquareSum();
}

}  // namespace tpuemu
