#include "core/chip_trainer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/gemm.h"
#include "core/link_clock.h"
#include "core/tensor_collective.h"
#include "core/train_model.h"

namespace tpuemu {
namespace {

// c = op(a) * op(b) for two matrices held as tensors.
LocalTensor MatMul(const LocalTensor& a, bool at, const LocalTensor& b, bool bt) {
  LocalTensor c = LocalTensor::Allocate({at ? a.shape[1] : a.shape[0], bt ? b.shape[0] : b.shape[1]});
  tpuemu::MatMul(a.data.get(), a.shape[0], a.shape[1], at, b.data.get(), b.shape[0], b.shape[1], bt, c.data.get());
  return c;
}

double MatMulFlops(const LocalTensor& c, int64_t k) { return 2.0 * static_cast<double>(c.elements()) * k; }

// Chunk tags: 12 bits of collective number above the collective's own step.
constexpr int kTagShift = 52;

}  // namespace

ChipTrainer::ChipTrainer(const TrainConfig& config, const TrainMesh& mesh, int chip, HostNetwork& net, uint64_t job)
    : c_(config), mesh_(mesh), chip_(chip), net_(net), job_(job) {
  const int data = mesh.size(MeshAxisKind::kData), fsdp = mesh.size(MeshAxisKind::kFsdp),
            tensor = mesh.size(MeshAxisKind::kTensor);
  b_ = c_.global_batch_tokens / (data * fsdp);
  d_f_ = c_.emb_dim / fsdp;
  f_t_ = c_.mlp_dim / tensor;
  d_t_ = c_.emb_dim / tensor;
  bi_ = mesh.BatchIndex(chip);
  fi_ = mesh.Index(chip, MeshAxisKind::kFsdp);
  ti_ = mesh.Index(chip, MeshAxisKind::kTensor);
}

void ChipTrainer::Prepare() {
  const int64_t d = c_.emb_dim, f = c_.mlp_dim;
  for (int l = 0; l < c_.num_layers; ++l) {
    LocalTensor win = LocalTensor::Allocate({d_f_, f_t_}), wout = LocalTensor::Allocate({f_t_, d_f_});
    for (int64_t r = 0; r < d_f_; ++r) {
      for (int64_t k = 0; k < f_t_; ++k) {
        win.data[r * f_t_ + k] = WeightValue(c_, WeightStream::kStudent, l, false, (d_offset() + r) * f + f_offset() + k);
      }
    }
    for (int64_t r = 0; r < f_t_; ++r) {
      for (int64_t k = 0; k < d_f_; ++k) {
        wout.data[r * d_f_ + k] = WeightValue(c_, WeightStream::kStudent, l, true, (f_offset() + r) * d + d_offset() + k);
      }
    }
    win_.push_back(std::move(win));
    wout_.push_back(std::move(wout));
    LocalTensor tw = LocalTensor::Allocate({d, f}), to = LocalTensor::Allocate({f, d});
    for (int64_t i = 0; i < d * f; ++i) tw.data[i] = WeightValue(c_, WeightStream::kTeacher, l, false, i);
    for (int64_t i = 0; i < f * d; ++i) to.data[i] = WeightValue(c_, WeightStream::kTeacher, l, true, i);
    teacher_win_.push_back(std::move(tw));
    teacher_wout_.push_back(std::move(to));
    m_in_.emplace_back(d_f_ * f_t_, 0.0f);
    v_in_.emplace_back(d_f_ * f_t_, 0.0f);
    m_out_.emplace_back(f_t_ * d_f_, 0.0f);
    v_out_.emplace_back(f_t_ * d_f_, 0.0f);
  }
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
  RunOptions options;
  options.job = job_;
  options.trace = &result_.trace;
  options.tag_base = static_cast<uint64_t>(++collectives_) << kTagShift;
  options.wire_bf16 = c_.wire_dtype_bytes == 2;
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

absl::Status ChipTrainer::ReduceGradient(LocalTensor& g, int d_dim, double& ready) {
  ready = now_;
  if (auto s = Collective(CollectiveOp::kReduceScatter, MeshAxisKind::kFsdp, g, d_dim, &ready); !s.ok()) return s;
  return Collective(CollectiveOp::kAllReduce, MeshAxisKind::kData, g, 0, &ready);
}

void ChipTrainer::WaitForGradient(double ready) {
  Wait(mesh_.size(MeshAxisKind::kData) > 1 ? MeshAxisKind::kData : MeshAxisKind::kFsdp, ready, "reduced gradients");
}

ChipTrainer::Ahead& ChipTrainer::Current(int use) {
  const int layers = c_.num_layers;
  auto issue = [&](int u) {
    Ahead& a = ahead_[u];
    const int layer = u < layers ? u : 2 * layers - 1 - u;
    a.win = win_[layer];
    a.wout = wout_[layer];
    a.status = Collective(CollectiveOp::kAllGather, MeshAxisKind::kFsdp, a.win, 0, &a.in_ready);
    if (a.status.ok()) a.status = Collective(CollectiveOp::kAllGather, MeshAxisKind::kFsdp, a.wout, 1, &a.out_ready);
  };
  for (auto it = ahead_.begin(); it != ahead_.end() && it->first < use;) it = ahead_.erase(it);
  if (!ahead_.count(use)) issue(use);
  if (use + 1 < 2 * layers && !ahead_.count(use + 1)) issue(use + 1);
  return ahead_[use];
}

absl::Status ChipTrainer::GatheredWeight(int use, bool in, LocalTensor& out) {
  const int layers = c_.num_layers;
  const int layer = use < layers ? use : 2 * layers - 1 - use;
  if (!c_.fsdp_prefetch) {
    out = in ? win_[layer] : wout_[layer];
    return Collective(CollectiveOp::kAllGather, MeshAxisKind::kFsdp, out, in ? 0 : 1);
  }
  Ahead& a = Current(use);
  if (!a.status.ok()) return a.status;
  Wait(MeshAxisKind::kFsdp, in ? a.in_ready : a.out_ready, "prefetched weights");
  out = in ? a.win : a.wout;
  return absl::OkStatus();
}

std::string ChipTrainer::Track() const { return absl::StrCat("chip ", chip_); }

void ChipTrainer::Wait(MeshAxisKind axis, double until, const char* what) {
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
  if (scale > 0) std::this_thread::sleep_until(wall_mark_ + std::chrono::duration_cast<WallClock::duration>(
                                                                std::chrono::duration<double>(dt * scale)));
  wall_mark_ = WallClock::now();
  now_ += dt;
  result_.compute_s += dt;
  result_.compute_parts_s[static_cast<int>(kind)] += dt;
}

absl::StatusOr<ChipRunResult> ChipTrainer::Step(int step) {
  const auto wall_start = WallClock::now();
  wall_mark_ = wall_start;
  result_ = ChipRunResult{};
  result_.chip = chip_;
  result_.step = step;
  links_.clear();
  ahead_.clear();
  for (auto& b : busy_) b.clear();
  now_ = 0;
  collectives_ = 0;
  const int64_t d = c_.emb_dim;
  const double bytes = c_.dtype_bytes;
  const int layers = c_.num_layers;

  // This chip's tokens, the teacher's targets for them (data generation:
  // not charged to the chip), and its D / tensor slice of both.
  const std::vector<float> tokens = BatchTokens(c_, step, bi_ * b_, b_);
  LocalTensor full = LocalTensor::Allocate({b_, d});
  std::memcpy(full.data.get(), tokens.data(), tokens.size() * sizeof(float));
  LocalTensor target = full;
  for (int l = 0; l < layers; ++l) {
    LocalTensor th = MatMul(target, false, teacher_win_[l], false);
    for (int64_t i = 0; i < th.elements(); ++i) th.data[i] = Activate(c_.activation, th.data[i]);
    target = MatMul(th, false, teacher_wout_[l], false);
  }
  const int tensor = mesh_.size(MeshAxisKind::kTensor);
  LocalTensor x = SliceBlock(full, 1, tensor, ti_);
  const LocalTensor y = SliceBlock(target, 1, tensor, ti_);

  // Forward.
  std::vector<LocalTensor> xg(layers), h(layers);
  for (int l = 0; l < layers; ++l) {
    xg[l] = x;
    if (auto s = Collective(CollectiveOp::kAllGather, MeshAxisKind::kTensor, xg[l], 1); !s.ok()) return s;
    LocalTensor w;
    if (auto s = GatheredWeight(l, true, w); !s.ok()) return s;
    h[l] = MatMul(xg[l], false, w, false);
    Compute(ComputeKind::kForwardMatmul, MatMulFlops(h[l], d), (xg[l].elements() + w.elements() + h[l].elements()) * bytes);
    LocalTensor a = LocalTensor::Allocate(h[l].shape);
    for (int64_t i = 0; i < a.elements(); ++i) a.data[i] = Activate(c_.activation, h[l].data[i]);
    Compute(ComputeKind::kOther, static_cast<double>(a.elements()), 2.0 * a.elements() * bytes);
    LocalTensor wo;
    if (auto s = GatheredWeight(l, false, wo); !s.ok()) return s;
    LocalTensor out = MatMul(a, false, wo, false);
    Compute(ComputeKind::kForwardMatmul, MatMulFlops(out, f_t_), (a.elements() + wo.elements() + out.elements()) * bytes);
    if (auto s = Collective(CollectiveOp::kReduceScatter, MeshAxisKind::kTensor, out, 1); !s.ok()) return s;
    x = std::move(out);
  }

  // Loss over the chip's block; the mean's gradient over the whole batch.
  LocalTensor dx = LocalTensor::Allocate(x.shape);
  const double scale = 1.0 / static_cast<double>(c_.global_batch_tokens * d);
  for (int64_t i = 0; i < x.elements(); ++i) {
    const double e = static_cast<double>(x.data[i]) - y.data[i];
    result_.loss_sum += e * e;
    dx.data[i] = static_cast<float>(2 * e * scale);
  }
  Compute(ComputeKind::kOther, 3.0 * x.elements(), 3.0 * x.elements() * bytes);

  // Backward, last layer first. Gradient reductions are not on the critical
  // path (seed 001): they are issued as soon as a gradient is computed and
  // run while the chip computes the layers below; the optimizer waits for them.
  std::vector<LocalTensor> dwouts(layers), dwins(layers);
  std::vector<double> grad_ready_out(layers), grad_ready_in(layers);
  for (int l = layers - 1; l >= 0; --l) {
    LocalTensor dog = dx;
    if (auto s = Collective(CollectiveOp::kAllGather, MeshAxisKind::kTensor, dog, 1); !s.ok()) return s;
    LocalTensor a = LocalTensor::Allocate(h[l].shape);
    for (int64_t i = 0; i < a.elements(); ++i) a.data[i] = Activate(c_.activation, h[l].data[i]);
    Compute(ComputeKind::kOther, static_cast<double>(a.elements()), 2.0 * a.elements() * bytes);
    LocalTensor dwout = MatMul(a, true, dog, false);  // [F_t, D], partial over the batch
    Compute(ComputeKind::kBackwardMatmul, MatMulFlops(dwout, b_), (a.elements() + dog.elements() + dwout.elements()) * bytes);
    if (auto s = ReduceGradient(dwout, 1, grad_ready_out[l]); !s.ok()) return s;
    LocalTensor wo;
    if (auto s = GatheredWeight(2 * layers - 1 - l, false, wo); !s.ok()) return s;
    LocalTensor dh = MatMul(dog, false, wo, true);  // [B, F_t]
    Compute(ComputeKind::kBackwardMatmul, MatMulFlops(dh, d), (dog.elements() + wo.elements() + dh.elements()) * bytes);
    for (int64_t i = 0; i < dh.elements(); ++i) dh.data[i] *= ActivateGrad(c_.activation, h[l].data[i]);
    Compute(ComputeKind::kOther, 2.0 * dh.elements(), 3.0 * dh.elements() * bytes);
    LocalTensor dwin = MatMul(xg[l], true, dh, false);  // [D, F_t], partial over the batch
    Compute(ComputeKind::kBackwardMatmul, MatMulFlops(dwin, b_), (xg[l].elements() + dh.elements() + dwin.elements()) * bytes);
    if (auto s = ReduceGradient(dwin, 0, grad_ready_in[l]); !s.ok()) return s;
    LocalTensor w;
    if (auto s = GatheredWeight(2 * layers - 1 - l, true, w); !s.ok()) return s;
    LocalTensor dxg = MatMul(dh, false, w, true);  // [B, D], partial over tensor
    Compute(ComputeKind::kBackwardMatmul, MatMulFlops(dxg, f_t_), (dh.elements() + w.elements() + dxg.elements()) * bytes);
    if (auto s = Collective(CollectiveOp::kReduceScatter, MeshAxisKind::kTensor, dxg, 1); !s.ok()) return s;
    dwouts[l] = std::move(dwout);
    dwins[l] = std::move(dwin);
    dx = std::move(dxg);
  }
  // The optimizer step, once each layer's reduced gradients are in.
  for (int l = layers - 1; l >= 0; --l) {
    WaitForGradient(std::max(grad_ready_out[l], grad_ready_in[l]));
    Update(wout_[l], dwouts[l], m_out_[l], v_out_[l], step + 1);
    Update(win_[l], dwins[l], m_in_[l], v_in_[l], step + 1);
  }

  result_.emulated_s = now_;
  for (int k = 0; k < 3; ++k) {
    // The union of the axis' collective intervals: its links' busy time,
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
  // Shards are replicated over the data axis: count one replica.
  if (mesh_.Index(chip_, MeshAxisKind::kData) != 0) return 0;
  double sum = 0;
  for (const auto* group : {&win_, &wout_}) {
    for (const LocalTensor& w : *group) {
      for (int64_t i = 0; i < w.elements(); ++i) sum += static_cast<double>(w.data[i]) * w.data[i];
    }
  }
  return sum;
}

void ChipTrainer::Update(LocalTensor& w, const LocalTensor& g, std::vector<float>& m, std::vector<float>& v,
                         int t) {
  // A fresh buffer: the old one may still be lent to frames in flight.
  LocalTensor out = LocalTensor::Allocate(w.shape);
  const int64_t n = w.elements();
  const float lr = static_cast<float>(c_.learning_rate);
  if (c_.opt_type == "sgd") {
    for (int64_t i = 0; i < n; ++i) out.data[i] = w.data[i] - lr * g.data[i];
    Compute(ComputeKind::kOther, 2.0 * n, 6.0 * n);
  } else {
    const float b1 = static_cast<float>(c_.adam_b1), b2 = static_cast<float>(c_.adam_b2);
    const float eps = static_cast<float>(c_.adam_eps);
    const float c1 = 1 - static_cast<float>(std::pow(c_.adam_b1, t));
    const float c2 = 1 - static_cast<float>(std::pow(c_.adam_b2, t));
    for (int64_t i = 0; i < n; ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g.data[i];
      v[i] = b2 * v[i] + (1 - b2) * g.data[i] * g.data[i];
      out.data[i] = w.data[i] - lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
    }
    // bf16 weights read and written, bf16 gradient, fp32 moments read and written.
    Compute(ComputeKind::kOther, 10.0 * n, 22.0 * n);
  }
  w = std::move(out);
}

}  // namespace tpuemu
