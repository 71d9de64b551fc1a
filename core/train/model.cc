#include "core/train/model.h"

#include <cmath>

#include "core/tensor/gemm.h"
#include "core/tensor/local_tensor.h"
#include "core/base/splitmix.h"

namespace tpuemu {
namespace {

// Uniform in [-1, 1), 24 random bits, from a (seed, stream, index) triple.
float Uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  const uint64_t r = SplitMix64(SplitMix64(SplitMix64(seed) ^ stream) ^ index);
  return UnitFloat(r);
}

constexpr uint64_t kWeightStream = 1, kBatchStream = 2;

}  // namespace

float WeightValue(const TrainConfig& c, WeightStream stream, int layer, bool out, int64_t index) {
  // Scaled so that activations keep their size through the layers.
  const int64_t fan_in = out ? c.mlp_dim : c.emb_dim;
  const float scale = std::sqrt(3.0f / static_cast<float>(fan_in));
  const uint64_t which = (static_cast<uint64_t>(stream) << 40) | (static_cast<uint64_t>(layer) << 1) | (out ? 1 : 0);
  return scale * Uniform(c.seed, kWeightStream, SplitMix64(which) ^ static_cast<uint64_t>(index));
}

void ForwardPass(const TrainConfig& c, const ModelWeights& m, std::vector<float>& x) {
  const int64_t b = static_cast<int64_t>(x.size()) / c.emb_dim, d = c.emb_dim, f = c.mlp_dim;
  std::vector<float> h(b * f);
  for (int l = 0; l < c.num_layers; ++l) {
    MatMul(x.data(), b, d, false, m.win[l].data(), d, f, false, h.data());
    for (float& e : h) e = Activate(c.activation, e);
    MatMul(h.data(), b, f, false, m.wout[l].data(), f, d, false, x.data());
  }
}

ModelWeights InitWeights(const TrainConfig& c, WeightStream stream) {
  ModelWeights w;
  const int64_t n = c.emb_dim * c.mlp_dim;
  for (int l = 0; l < c.num_layers; ++l) {
    std::vector<float> win(n), wout(n);
    for (int64_t i = 0; i < n; ++i) win[i] = WeightValue(c, stream, l, false, i);
    for (int64_t i = 0; i < n; ++i) wout[i] = WeightValue(c, stream, l, true, i);
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
  std::vector<float> x(count * d);
  for (int64_t t = 0; t < count; ++t) {
    const uint64_t token = (static_cast<uint64_t>(step) << 32) | static_cast<uint64_t>(first + t);
    for (int64_t j = 0; j < d; ++j) x[t * d + j] = Uniform(c.seed, kBatchStream, SplitMix64(token) ^ static_cast<uint64_t>(j));
  }
  return x;
}

float Activate(const std::string& name, float h) {
  if (name == "relu") return h > 0 ? h : 0;
  if (name == "tanh") return std::tanh(h);
  if (name == "silu") return h / (1 + std::exp(-h));
  if (name == "gelu") {
    const float k = 0.7978845608f;  // sqrt(2 / pi), tanh approximation
    return 0.5f * h * (1 + std::tanh(k * (h + 0.044715f * h * h * h)));
  }
  return h;  // linear
}

float ActivateGrad(const std::string& name, float h) {
  if (name == "relu") return h > 0 ? 1.0f : 0.0f;
  if (name == "tanh") {
    const float t = std::tanh(h);
    return 1 - t * t;
  }
  if (name == "silu") {
    const float s = 1 / (1 + std::exp(-h));
    return s * (1 + h * (1 - s));
  }
  if (name == "gelu") {
    const float k = 0.7978845608f;
    const float u = k * (h + 0.044715f * h * h * h);
    const float t = std::tanh(u);
    return 0.5f * (1 + t) + 0.5f * h * (1 - t * t) * k * (1 + 3 * 0.044715f * h * h);
  }
  return 1.0f;
}

ReferenceTrainer::ReferenceTrainer(const TrainConfig& config)
    : c_(config), weights_(InitWeights(config, WeightStream::kStudent)),
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
  const std::vector<float> x0 = BatchTokens(c_, step_, 0, b);

  // Teacher targets.
  std::vector<float> y = x0;
  ForwardPass(c_, teacher_, y);

  // Forward, keeping every layer's input and pre-activation.
  std::vector<std::vector<float>> xs(layers + 1), hs(layers);
  xs[0] = x0;
  for (int l = 0; l < layers; ++l) {
    hs[l].resize(b * f);
    MatMul(xs[l].data(), b, d, false, weights_.win[l].data(), d, f, false, hs[l].data());
    std::vector<float> a(b * f);
    for (int64_t i = 0; i < b * f; ++i) a[i] = Activate(c_.activation, hs[l][i]);
    xs[l + 1].resize(b * d);
    MatMul(a.data(), b, f, false, weights_.wout[l].data(), f, d, false, xs[l + 1].data());
  }
  double loss = 0;
  std::vector<float> dx(b * d);
  const double scale = 1.0 / static_cast<double>(b * d);
  for (int64_t i = 0; i < b * d; ++i) {
    const double e = static_cast<double>(xs[layers][i]) - y[i];
    loss += e * e;
    dx[i] = static_cast<float>(2 * e * scale);
  }
  loss *= scale;

  // Backward and update, last layer first.
  ++step_;
  for (int l = layers - 1; l >= 0; --l) {
    std::vector<float> a(b * f), da(b * f), dwout(f * d), dwin(d * f), dprev(b * d);
    for (int64_t i = 0; i < b * f; ++i) a[i] = Activate(c_.activation, hs[l][i]);
    MatMul(a.data(), b, f, true, dx.data(), b, d, false, dwout.data());                   // dWout = A^T dOut
    MatMul(dx.data(), b, d, false, weights_.wout[l].data(), f, d, true, da.data());      // dA = dOut Wout^T
    for (int64_t i = 0; i < b * f; ++i) da[i] *= ActivateGrad(c_.activation, hs[l][i]);  // dH
    MatMul(xs[l].data(), b, d, true, da.data(), b, f, false, dwin.data());               // dWin = X^T dH
    MatMul(da.data(), b, f, false, weights_.win[l].data(), d, f, true, dprev.data());    // dX = dH Win^T
    Update(weights_.wout[l], dwout, m_.wout[l], v_.wout[l]);
    Update(weights_.win[l], dwin, m_.win[l], v_.win[l]);
    dx = std::move(dprev);
  }
  return {step_ - 1, loss};
}

void ReferenceTrainer::Update(std::vector<float>& w, const std::vector<float>& g, std::vector<float>& m,
                              std::vector<float>& v) {
  const float lr = static_cast<float>(c_.learning_rate);
  if (c_.opt_type == "sgd") {
    for (size_t i = 0; i < w.size(); ++i) w[i] -= lr * g[i];
    return;
  }
  const float b1 = static_cast<float>(c_.adam_b1), b2 = static_cast<float>(c_.adam_b2);
  const float eps = static_cast<float>(c_.adam_eps);
  const float c1 = 1 - static_cast<float>(std::pow(c_.adam_b1, step_));
  const float c2 = 1 - static_cast<float>(std::pow(c_.adam_b2, step_));
  for (size_t i = 0; i < w.size(); ++i) {
    m[i] = b1 * m[i] + (1 - b1) * g[i];
    v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
    w[i] -= lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps);
  }
}

}  // namespace tpuemu
