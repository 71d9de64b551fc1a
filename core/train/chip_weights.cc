#include "core/train/chip_weights.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tpuemu {

void ChipWeights::Init(const TrainConfig& config, const std::vector<bool>& owned, const WeightShard& s) {
  c_ = config;
  owned_ = owned;
  const int64_t d = c_.emb_dim;
  const int layers = c_.num_layers;
  for (int k = 0; k < kMatrixKinds; ++k) {
    w_[k].assign(layers, LocalTensor{});
    m_[k].assign(layers, {});
    v_[k].assign(layers, {});
  }
  for (int l = 0; l < layers; ++l) {
    if (!owned_[l]) continue;  // another stage's layer
    for (Matrix m : LayerMatrices(c_, l)) {
      const int k = static_cast<int>(m);
      const bool along_d = AlongD(m);
      const int64_t width = MatrixWidth(c_, m), cols = width / s.tensor_ways, col_offset = s.tensor_index * cols;
      const std::vector<int64_t> shape = along_d ? std::vector<int64_t>{s.d_rows, cols}
                                                 : std::vector<int64_t>{cols, s.d_rows};
      if (c_.shape_only()) {
        w_[k][l] = LocalTensor::ShapeOnly(shape);
        continue;
      }
      LocalTensor w = LocalTensor::Allocate(shape);
      const LayerWeights full(c_, WeightStream::kStudent, l, m);
      for (int64_t r = 0; r < shape[0]; ++r) {
        for (int64_t col = 0; col < shape[1]; ++col) {
          w.data[r * shape[1] + col] = along_d ? full((s.d_offset + r) * width + col_offset + col)
                                               : full((col_offset + r) * d + s.d_offset + col);
        }
      }
      w_[k][l] = std::move(w);
      m_[k][l].assign(s.d_rows * cols, 0.0f);
      v_[k][l].assign(s.d_rows * cols, 0.0f);
    }
  }
}

// Also built for AVX2: 8 lanes of the same IEEE operations (no FMA), so the
// same bits as the baseline build's 4.
__attribute__((target_clones("avx2", "default"))) ElementwiseCost ChipWeights::Update(int l, Matrix which,
                                                                                      const LocalTensor& g, int t) {
  const int k = static_cast<int>(which);
  LocalTensor& w = w_[k][l];
  std::vector<float>& m = m_[k][l];
  std::vector<float>& v = v_[k][l];
  const int64_t n = w.has_values() ? w.elements() : 0;  // values to update
  const double e = static_cast<double>(w.elements());   // what the chip is charged for
  // In place, unless frames in flight still hold the buffer (FSDP lends
  // weight shards to its all-gathers): then into a fresh one. A fresh buffer
  // every step cost each chip its weights' size in page faults and zeroing.
  LocalTensor fresh;
  if (w.data.use_count() > 1) fresh = LocalTensor::Make(w.shape, w.has_values());
  const float* in = w.data.get();
  float* out = fresh.has_values() ? fresh.data.get() : w.data.get();
  const float lr = static_cast<float>(c_.learning_rate);
  ElementwiseCost cost;
  if (c_.opt_type == "sgd") {
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] - lr * g.data[i];
    cost = {2.0 * e, 6.0 * e};
  } else {
    const float b1 = static_cast<float>(c_.adam_b1), b2 = static_cast<float>(c_.adam_b2);
    const float eps = static_cast<float>(c_.adam_eps);
    const float c1 = 1 - static_cast<float>(std::pow(c_.adam_b1, t));
    const float c2 = 1 - static_cast<float>(std::pow(c_.adam_b2, t));
    for (int64_t i = 0; i < n; ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g.data[i];
      v[i] = b2 * v[i] + (1 - b2) * g.data[i] * g.data[i];
      out[i] = in[i] - lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
    }
    // bf16 weights read and written, bf16 gradient, fp32 moments read and written.
    cost = {10.0 * e, 22.0 * e};
  }
  if (fresh.has_values()) w = std::move(fresh);
  return cost;
}

template <class Self, class Fn>
void ChipWeights::ForEachArray(Self& self, Fn fn) {
  for (size_t l = 0; l < self.owned_.size(); ++l) {
    if (!self.owned_[l] || !self.win(l).has_values()) continue;  // another stage's, or shape-only
    // Win and Wout first, as checkpoints held them before gated MLPs.
    for (Matrix m : {Matrix::kIn, Matrix::kOut}) fn(self.w_[static_cast<int>(m)][l].data.get(), self.w_[static_cast<int>(m)][l].elements());
    for (Matrix m : {Matrix::kIn, Matrix::kOut}) {
      for (auto* moments : {&self.m_[static_cast<int>(m)][l], &self.v_[static_cast<int>(m)][l]}) {
        fn(moments->data(), static_cast<int64_t>(moments->size()));
      }
    }
    // Then each other matrix the block has, with its moments.
    for (Matrix m : LayerMatrices(self.c_, static_cast<int>(l))) {
      if (m == Matrix::kIn || m == Matrix::kOut) continue;
      const int k = static_cast<int>(m);
      fn(self.w_[k][l].data.get(), self.w_[k][l].elements());
      for (auto* moments : {&self.m_[k][l], &self.v_[k][l]}) fn(moments->data(), static_cast<int64_t>(moments->size()));
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
    for (Matrix m : LayerMatrices(c_, static_cast<int>(l))) {
      const LocalTensor& w = weight(m, static_cast<int>(l));
      if (!w.has_values()) continue;  // shape-only
      for (int64_t i = 0; i < w.elements(); ++i) sum += static_cast<double>(w.data[i]) * w.data[i];
    }
  }
  return sum;
}

}  // namespace tpuemu
