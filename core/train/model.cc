#include "core/train/model.h"

#include <cmath>

#include "core/base/parallel_for.h"
#include "core/tensor/gemm.h"
#include "core/train/activation.h"

namespace tpuemu {
namespace {

// Every value is Uniform in [-1, 1) (24 random bits) of the hash of
// (seed, stream, index): the key is the first two, made once per matrix.
constexpr uint64_t kWeightStream = 1, kBatchStream = 2;

uint64_t StreamKey(uint64_t seed, uint64_t stream) { return SplitMix64(SplitMix64(seed) ^ stream); }

}  // namespace

LayerWeights::LayerWeights(const TrainConfig& c, WeightStream stream, int layer, bool out)
    // Scaled so that activations keep their size through the layers.
    : scale_(std::sqrt(3.0f / static_cast<float>(out ? c.mlp_dim : c.emb_dim))),
      key_(StreamKey(c.seed, kWeightStream)),
      matrix_(SplitMix64((static_cast<uint64_t>(stream) << 40) | (static_cast<uint64_t>(layer) << 1) | (out ? 1 : 0))) {}

void ForwardPass(const TrainConfig& c, const ModelWeights& m, std::vector<float>& x) {
  const int64_t b = static_cast<int64_t>(x.size()) / c.emb_dim, d = c.emb_dim, f = c.mlp_dim;
  const Activation act = ActivationNamed(c.activation);
  std::vector<float> h(b * f);
  for (int l = 0; l < c.num_layers; ++l) {
    MatMul(x.data(), b, d, false, m.win[l].data(), d, f, false, h.data());
    Activate(act, h.data(), b * f, h.data());
    MatMul(h.data(), b, f, false, m.wout[l].data(), f, d, false, x.data());
  }
}

ModelWeights InitWeights(const TrainConfig& c, WeightStream stream) {
  ModelWeights w;
  const int64_t n = c.emb_dim * c.mlp_dim;
  for (int l = 0; l < c.num_layers; ++l) {
    std::vector<float> win(n), wout(n);
    const LayerWeights in(c, stream, l, false), out(c, stream, l, true);
    for (int64_t i = 0; i < n; ++i) win[i] = in(i);
    for (int64_t i = 0; i < n; ++i) wout[i] = out(i);
    w.win.push_back(std::move(win));
    w.wout.push_back(std::move(wout));
  }
  return w;
}

double BatchLoss(const TrainConfig& c, const ModelWeights& w, int step) {
  const int64_t b = c.global_batch_tokens, d = c.emb_dim;
  std::vector<float> x = BatchTokens(c, step, 0, b), y = x;
  ForwardPass(c, InitWeights(c, WeightStream::kTeacher), y);
  ForwardPass(c, w, x);
  double loss = 0;
  for (int64_t i = 0; i < b * d; ++i) loss += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
  return loss / static_cast<double>(b * d);
}

double SumOfSquares(const ModelWeights& w) {
  double sum = 0;
  for (const auto* group : {&w.win, &w.wout}) {
    for (const auto& m : *group) {
      for (float v : m) sum += static_cast<double>(v) * v;
    }
  }
  return sum;
}

std::vector<float> BatchTokens(const TrainConfig& c, int step, int64_t first, int64_t count) {
  const int64_t d = c.emb_dim;
  const uint64_t key = StreamKey(c.seed, kBatchStream);
  std::vector<float> x(count * d);
  for (int64_t t = 0; t < count; ++t) {
    const uint64_t token = SplitMix64((static_cast<uint64_t>(step) << 32) | static_cast<uint64_t>(first + t));
    for (int64_t j = 0; j < d; ++j) x[t * d + j] = UnitFloat(SplitMix64(key ^ (token ^ static_cast<uint64_t>(j))));
  }
  return x;
}

ReferenceTrainer::ReferenceTrainer(const TrainConfig& config, int threads)
    : c_(config), threads_(threads), weights_(InitWeights(config, WeightStream::kStudent)),
      teacher_(InitWeights(config, WeightStream::kTeacher)) {
  for (const auto& w : weights_.win) {
    m_.win.emplace_back(w.size(), 0.0f);
    v_.win.emplace_back(w.size(), 0.0f);
  }
  for (const auto& w : weights_.wout) {
    m_.wout.emplace_back(w.size(), 0.0f);
    v_.wout.emplace_back(w.size(), 0.0f);
  }
}

StepRecord ReferenceTrainer::Step() {
  const int64_t b = c_.global_batch_tokens, d = c_.emb_dim, f = c_.mlp_dim;
  const int layers = c_.num_layers;
  const Activation act = ActivationNamed(c_.activation);
  xs_.resize(layers + 1);
  as_.resize(layers);
  grads_.resize(layers);
  xs_[0] = BatchTokens(c_, step_, 0, b);

  // Teacher targets.
  y_ = xs_[0];
  ForwardPass(c_, teacher_, y_);

  // Forward, keeping every layer's input, activation and its derivative
  // (the pre-activation goes first into the derivative's buffer).
  for (int l = 0; l < layers; ++l) {
    as_[l].resize(b * f);
    grads_[l].resize(b * f);
    xs_[l + 1].resize(b * d);
    float* h = grads_[l].data();
    MatMul(xs_[l].data(), b, d, false, weights_.win[l].data(), d, f, false, h, nullptr, threads_);
    ParallelFor(b * f, threads_, [&](int64_t i, int64_t end) { ActivateWithGrad(act, h + i, end - i, &as_[l][i], h + i); });
    MatMul(as_[l].data(), b, f, false, weights_.wout[l].data(), f, d, false, xs_[l + 1].data(), nullptr, threads_);
  }
  double loss = 0;
  dx_.resize(b * d);
  const double scale = 1.0 / static_cast<double>(b * d);
  for (int64_t i = 0; i < b * d; ++i) {
    const double e = static_cast<double>(xs_[layers][i]) - y_[i];
    loss += e * e;
    dx_[i] = static_cast<float>(2 * e * scale);
  }
  loss *= scale;

  // Backward and update, last layer first.
  ++step_;
  da_.resize(b * f);
  dwout_.resize(f * d);
  dwin_.resize(d * f);
  dprev_.resize(b * d);
  for (int l = layers - 1; l >= 0; --l) {
    const float* grad = grads_[l].data();
    MatMul(as_[l].data(), b, f, true, dx_.data(), b, d, false, dwout_.data(), nullptr, threads_);  // dWout = A^T dOut
    MatMul(dx_.data(), b, d, false, weights_.wout[l].data(), f, d, true, da_.data(), nullptr, threads_);  // dA
    ParallelFor(b * f, threads_, [&](int64_t i, int64_t end) {
      for (; i < end; ++i) da_[i] *= grad[i];  // dH
    });
    MatMul(xs_[l].data(), b, d, true, da_.data(), b, f, false, dwin_.data(), nullptr, threads_);  // dWin = X^T dH
    MatMul(da_.data(), b, f, false, weights_.win[l].data(), d, f, true, dprev_.data(), nullptr, threads_);  // dX
    Update(weights_.wout[l], dwout_, m_.wout[l], v_.wout[l]);
    Update(weights_.win[l], dwin_, m_.win[l], v_.win[l]);
    std::swap(dx_, dprev_);
  }
  return {step_ - 1, loss};
}

void ReferenceTrainer::Update(std::vector<float>& w, const std::vector<float>& g, std::vector<float>& m,
                              std::vector<float>& v) {
  const float lr = static_cast<float>(c_.learning_rate);
  const int64_t n = static_cast<int64_t>(w.size());
  if (c_.opt_type == "sgd") {
    ParallelFor(n, threads_, [&](int64_t i, int64_t end) {
      for (; i < end; ++i) w[i] -= lr * g[i];
    });
    return;
  }
  const float b1 = static_cast<float>(c_.adam_b1), b2 = static_cast<float>(c_.adam_b2);
  const float eps = static_cast<float>(c_.adam_eps);
  const float c1 = 1 - static_cast<float>(std::pow(c_.adam_b1, step_));
  const float c2 = 1 - static_cast<float>(std::pow(c_.adam_b2, step_));
  ParallelFor(n, threads_, [&](int64_t i, int64_t end) {
    for (; i < end; ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      w[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
    }
  });
}

}  // namespace tpuemu
