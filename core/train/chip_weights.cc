#include "core/train/chip_weights.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

#include "core/train/model.h"

namespace tpuemu {

void ChipWeights::Init(const TrainConfig& config, const std::vector<bool>& owned, const WeightShard& s) {
  c_ = config;
  owned_ = owned;
  const int64_t d = c_.emb_dim, f = c_.mlp_dim;
  const int layers = c_.num_layers;
  win_.assign(layers, LocalTensor{});
  wout_.assign(layers, LocalTensor{});
  m_in_.assign(layers, {});
  v_in_.assign(layers, {});
  m_out_.assign(layers, {});
  v_out_.assign(layers, {});
  for (int l = 0; l < layers; ++l) {
    if (!owned_[l]) continue;  // another stage's layer
    if (c_.shape_only()) {
      win_[l] = LocalTensor::ShapeOnly({s.d_rows, s.f_cols});
      wout_[l] = LocalTensor::ShapeOnly({s.f_cols, s.d_rows});
      continue;
    }
    LocalTensor win = LocalTensor::Allocate({s.d_rows, s.f_cols}), wout = LocalTensor::Allocate({s.f_cols, s.d_rows});
    const LayerWeights in(c_, WeightStream::kStudent, l, false), out(c_, WeightStream::kStudent, l, true);
    for (int64_t r = 0; r < s.d_rows; ++r) {
      for (int64_t k = 0; k < s.f_cols; ++k) win.data[r * s.f_cols + k] = in((s.d_offset + r) * f + s.f_offset + k);
    }
    for (int64_t r = 0; r < s.f_cols; ++r) {
      for (int64_t k = 0; k < s.d_rows; ++k) wout.data[r * s.d_rows + k] = out((s.f_offset + r) * d + s.d_offset + k);
    }
    win_[l] = std::move(win);
    wout_[l] = std::move(wout);
    m_in_[l].assign(s.d_rows * s.f_cols, 0.0f);
    v_in_[l].assign(s.d_rows * s.f_cols, 0.0f);
    m_out_[l].assign(s.f_cols * s.d_rows, 0.0f);
    v_out_[l].assign(s.f_cols * s.d_rows, 0.0f);
  }
}

ElementwiseCost ChipWeights::Update(int l, bool in, const LocalTensor& g, int t) {
  LocalTensor& w = in ? win_[l] : wout_[l];
  std::vector<float>& m = in ? m_in_[l] : m_out_[l];
  std::vector<float>& v = in ? v_in_[l] : v_out_[l];
  // A fresh buffer: the old one may still be lent to frames in flight.
  LocalTensor out = LocalTensor::Make(w.shape, w.has_values());
  const int64_t n = w.has_values() ? w.elements() : 0;  // values to update
  const double e = static_cast<double>(w.elements());   // what the chip is charged for
  const float lr = static_cast<float>(c_.learning_rate);
  ElementwiseCost cost;
  if (c_.opt_type == "sgd") {
    for (int64_t i = 0; i < n; ++i) out.data[i] = w.data[i] - lr * g.data[i];
    cost = {2.0 * e, 6.0 * e};
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
    cost = {10.0 * e, 22.0 * e};
  }
  w = std::move(out);
  return cost;
}

template <class Self, class Fn>
void ChipWeights::ForEachArray(Self& self, Fn fn) {
  for (size_t l = 0; l < self.owned_.size(); ++l) {
    if (!self.owned_[l] || !self.win_[l].has_values()) continue;  // another stage's, or shape-only
    fn(self.win_[l].data.get(), self.win_[l].elements());
    fn(self.wout_[l].data.get(), self.wout_[l].elements());
    for (auto* moments : {&self.m_in_[l], &self.v_in_[l], &self.m_out_[l], &self.v_out_[l]}) {
      fn(moments->data(), static_cast<int64_t>(moments->size()));
    }
  }
}

std::string ChipWeights::Save() const {
  std::string out;
  ForEachArray(*this, [&](const float* p, int64_t n) {
    out.append(reinterpret_cast<const char*>(p), n * sizeof(float));
  });
  return out;
}

absl::Status ChipWeights::Restore(const std::string& state) {
  size_t expected = 0;
  ForEachArray(*this, [&](const float*, int64_t n) { expected += n * sizeof(float); });
  if (state.size() != expected) {
    return absl::DataLossError(absl::StrCat("the checkpoint holds ", state.size(), " bytes where this chip's shards "
                                            "and moments take ", expected, ": it is another job's, or another mesh's"));
  }
  size_t at = 0;
  ForEachArray(*this, [&](float* p, int64_t n) {
    // Shards are fresh allocations from Init, not lent to any frame yet.
    std::memcpy(p, state.data() + at, n * sizeof(float));
    at += n * sizeof(float);
  });
  return absl::OkStatus();
}

double ChipWeights::SquareSum() const {
  double sum = 0;
  for (size_t l = 0; l < owned_.size(); ++l) {
    if (!owned_[l]) continue;
    for (const LocalTensor* w : {&win_[l], &wout_[l]}) {
      if (!w->has_values()) continue;  // shape-only
      for (int64_t i = 0; i < w->elements(); ++i) sum += static_cast<double>(w->data[i]) * w->data[i];
    }
  }
  return sum;
}

}  // namespace tpuemu
