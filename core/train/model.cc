#include "core/train/model.h"

#include <cmath>

#include "core/base/parallel_for.h"
#include "core/tensor/gemm.h"
#include "core/train/activation.h"
#include "core/train/vocab.h"

namespace tpuemu {
namespace {

// Every value is Uniform in [-1, 1) (24 random bits) of the hash of
// (seed, stream, index): the key is the first two, made once per matrix.
constexpr uint64_t kWeightStream = 1, kBatchStream = 2, kTokenIdStream = 3, kTargetStream = 4;

uint64_t StreamKey(uint64_t seed, uint64_t stream) { return SplitMix64(SplitMix64(seed) ^ stream); }

// Which matrix: Win and Wout as before gated MLPs (their values unchanged),
// Wup apart from both, attention's apart from all three.
uint64_t MatrixBits(int layer, Matrix m) {
  const uint64_t l = static_cast<uint64_t>(layer) << 1;
  switch (m) {
    case Matrix::kIn: return l;
    case Matrix::kOut: return l | 1;
    case Matrix::kUp: return (uint64_t{1} << 39) | l;
    default: return (static_cast<uint64_t>(m) << 33) | l;
  }
}

constexpr Matrix kAttentionMatrices[] = {Matrix::kQuery, Matrix::kKey, Matrix::kValue, Matrix::kAttnOut};

// y [rows, cols] = x [rows, inner] W [inner, cols].
void Multiply(const float* x, int64_t rows, int64_t inner, const std::vector<float>& w, int64_t cols, float* y,
              int threads = 1) {
  MatMul(x, rows, inner, false, w.data(), inner, cols, false, y, nullptr, threads);
}

}  // namespace

std::vector<Matrix> BlockMatrices(const TrainConfig& config) {
  std::vector<Matrix> out;
  if (config.attention()) out.assign(std::begin(kAttentionMatrices), std::end(kAttentionMatrices));
  out.push_back(Matrix::kIn);
  if (config.gated_mlp) out.push_back(Matrix::kUp);
  out.push_back(Matrix::kOut);
  return out;
}

std::vector<Matrix> LayerMatrices(const TrainConfig& config, int layer) {
  std::vector<Matrix> out = BlockMatrices(config);
  if (!config.embeddings()) return out;
  if (layer == 0) out.insert(out.begin(), Matrix::kEmbed);
  if (layer == config.num_layers - 1) out.push_back(Matrix::kVocab);
  return out;
}

int64_t MatrixWidth(const TrainConfig& c, Matrix m) {
  switch (m) {
    case Matrix::kEmbed:
    case Matrix::kVocab: return c.vocab_size;
    case Matrix::kQuery:
    case Matrix::kAttnOut: return c.q_width();
    case Matrix::kKey:
    case Matrix::kValue: return c.kv_width();
    default: return c.mlp_dim;
  }
}

AttentionShape AttentionOf(const TrainConfig& c, int64_t rows, int tensor) {
  return {rows / c.seq_len, c.seq_len, c.num_query_heads / tensor, c.num_kv_heads / tensor, c.head_dim};
}

std::vector<std::vector<float>>& ModelWeights::of(Matrix m) {
  switch (m) {
    case Matrix::kIn: return win;
    case Matrix::kUp: return wup;
    case Matrix::kOut: return wout;
    case Matrix::kQuery: return wq;
    case Matrix::kKey: return wk;
    case Matrix::kValue: return wv;
    case Matrix::kAttnOut: return wo;
    case Matrix::kEmbed: return embed;
    case Matrix::kVocab: return vocab;
  }
  return win;
}
const std::vector<std::vector<float>>& ModelWeights::of(Matrix m) const { return const_cast<ModelWeights*>(this)->of(m); }

LayerWeights::LayerWeights(const TrainConfig& c, WeightStream stream, int layer, Matrix m)
    // Scaled so that activations keep their size through the layers; Wup
    // twice more, since act(x Win) * (x Wup) multiplies two values below 1.
    // (With no normalization between blocks, a deep gated stack still
    // grows or fades: the product is quadratic in its input.) Embeddings
    // are Uniform [-1, 1), as the vectors a model without a vocabulary reads.
    : scale_(m == Matrix::kEmbed ? 1.0f
                                 : (m == Matrix::kUp ? 2.0f : 1.0f) *
                                       std::sqrt(3.0f / static_cast<float>(AlongD(m) ? c.emb_dim : MatrixWidth(c, m)))),
      key_(StreamKey(c.seed, kWeightStream)),
      matrix_(SplitMix64((static_cast<uint64_t>(stream) << 40) | MatrixBits(layer, m))) {}

// x [rows, D] <- attention's output on x (rows whole sequences), forward only.
void AttentionPass(const TrainConfig& c, const ModelWeights& m, int l, std::vector<float>& x, int threads) {
  const int64_t b = static_cast<int64_t>(x.size()) / c.emb_dim, d = c.emb_dim;
  const AttentionShape s = AttentionOf(c, b);
  std::vector<float> q(b * s.q_width()), k(b * s.kv_width()), v(b * s.kv_width()), p(s.prob_elements()),
      o(b * s.q_width());
  Multiply(x.data(), b, d, m.wq[l], s.q_width(), q.data(), threads);
  Multiply(x.data(), b, d, m.wk[l], s.kv_width(), k.data(), threads);
  Multiply(x.data(), b, d, m.wv[l], s.kv_width(), v.data(), threads);
  AttentionForward(s, q.data(), k.data(), v.data(), p.data(), o.data());
  Multiply(o.data(), b, s.q_width(), m.wo[l], d, x.data(), threads);
}

void ForwardPass(const TrainConfig& c, const ModelWeights& m, std::vector<float>& x, int threads) {
  const int64_t b = static_cast<int64_t>(x.size()) / c.emb_dim, d = c.emb_dim, f = c.mlp_dim;
  const Activation act = ActivationNamed(c.activation);
  std::vector<float> h(b * f), u(c.gated_mlp ? b * f : 0);
  for (int l = 0; l < c.num_layers; ++l) {
    if (c.attention()) AttentionPass(c, m, l, x, threads);
    Multiply(x.data(), b, d, m.win[l], f, h.data(), threads);
    ParallelFor(b * f, threads, [&](int64_t i, int64_t end) { Activate(act, h.data() + i, end - i, h.data() + i); });
    if (c.gated_mlp) {
      Multiply(x.data(), b, d, m.wup[l], f, u.data(), threads);
      ParallelFor(b * f, threads, [&](int64_t i, int64_t end) {
        for (; i < end; ++i) h[i] *= u[i];
      });
    }
    Multiply(h.data(), b, f, m.wout[l], d, x.data(), threads);
  }
}

ModelWeights InitWeights(const TrainConfig& c, WeightStream stream) {
  ModelWeights w;
  for (int l = 0; l < c.num_layers; ++l) {
    for (Matrix m : LayerMatrices(c, l)) {
      std::vector<float> values(c.emb_dim * MatrixWidth(c, m));
      const LayerWeights full(c, stream, l, m);
      for (int64_t i = 0; i < static_cast<int64_t>(values.size()); ++i) values[i] = full(i);
      w.of(m).resize(c.num_layers);  // by layer; empty where the layer has none
      w.of(m)[l] = std::move(values);
    }
  }
  return w;
}

namespace {

// The embedded tokens of `ids`: [rows, D].
std::vector<float> Embedded(const TrainConfig& c, const ModelWeights& w, const std::vector<int64_t>& ids) {
  std::vector<float> x(ids.size() * c.emb_dim);
  EmbeddingLookup(w.embed[0].data(), 0, c.vocab_size, c.emb_dim, ids.data(), static_cast<int64_t>(ids.size()),
                  x.data());
  return x;
}

// The cross-entropy summed over x's rows (the last layer's output), keeping
// the logits and their log-sum-exps.
double CrossEntropySum(const TrainConfig& c, const ModelWeights& w, const std::vector<float>& x,
                       const std::vector<int64_t>& targets, std::vector<float>& logits, std::vector<float>& lse,
                       int threads) {
  const int64_t b = static_cast<int64_t>(targets.size()), v = c.vocab_size;
  logits.resize(b * v);
  lse.resize(b);
  MatMul(x.data(), b, c.emb_dim, false, w.vocab[c.num_layers - 1].data(), c.emb_dim, v, false, logits.data(), nullptr,
         threads);
  std::vector<float> stats(b * kLogitStats);
  LogitStats(logits.data(), b, v, 0, targets.data(), stats.data());
  return CombineLogitStats(stats.data(), b, 1, lse.data());
}

}  // namespace

double BatchLoss(const TrainConfig& c, const ModelWeights& w, int step) {
  const int64_t b = c.global_batch_tokens, d = c.emb_dim;
  if (c.embeddings()) {
    const std::vector<int64_t> ids = BatchTokenIds(c, step, 0, b);
    std::vector<float> x = Embedded(c, w, ids), logits, lse;
    ForwardPass(c, w, x);
    return CrossEntropySum(c, w, x, TargetIds(c, ids), logits, lse, 1) / static_cast<double>(b);
  }
  std::vector<float> x = BatchTokens(c, step, 0, b), y = x;
  ForwardPass(c, InitWeights(c, WeightStream::kTeacher), y);
  ForwardPass(c, w, x);
  double loss = 0;
  for (int64_t i = 0; i < b * d; ++i) loss += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
  return loss / static_cast<double>(b * d);
}

double SumOfSquares(const ModelWeights& w) {
  double sum = 0;
  for (const auto* group : {&w.win, &w.wup, &w.wout, &w.wq, &w.wk, &w.wv, &w.wo, &w.embed, &w.vocab}) {
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

std::vector<int64_t> BatchTokenIds(const TrainConfig& c, int step, int64_t first, int64_t count) {
  const uint64_t key = StreamKey(c.seed, kTokenIdStream);
  std::vector<int64_t> ids(count);
  for (int64_t t = 0; t < count; ++t) {
    const uint64_t token = SplitMix64((static_cast<uint64_t>(step) << 32) | static_cast<uint64_t>(first + t));
    ids[t] = static_cast<int64_t>(SplitMix64(key ^ token) % static_cast<uint64_t>(c.vocab_size));
  }
  return ids;
}

std::vector<int64_t> TargetIds(const TrainConfig& c, const std::vector<int64_t>& ids) {
  const uint64_t key = StreamKey(c.seed, kTargetStream);
  std::vector<int64_t> targets(ids.size());
  for (size_t t = 0; t < ids.size(); ++t) {
    targets[t] = static_cast<int64_t>(SplitMix64(key ^ static_cast<uint64_t>(ids[t])) % static_cast<uint64_t>(c.vocab_size));
  }
  return targets;
}

ReferenceTrainer::ReferenceTrainer(const TrainConfig& config, int threads)
    : c_(config), threads_(threads), weights_(InitWeights(config, WeightStream::kStudent)) {
  // A model with a vocabulary learns its targets' map; one without, the teacher.
  if (!c_.embeddings()) teacher_ = InitWeights(config, WeightStream::kTeacher);
  for (int k = 0; k < kMatrixKinds; ++k) {
    const Matrix m = static_cast<Matrix>(k);
    for (const auto& w : weights_.of(m)) {
      m_.of(m).emplace_back(w.size(), 0.0f);
      v_.of(m).emplace_back(w.size(), 0.0f);
    }
  }
}

StepRecord ReferenceTrainer::Step() {
  const int64_t b = c_.global_batch_tokens, d = c_.emb_dim, f = c_.mlp_dim;
  const int layers = c_.num_layers;
  const Activation act = ActivationNamed(c_.activation);
  xs_.resize(layers + 1);
  as_.resize(layers);
  grads_.resize(layers);
  us_.resize(c_.gated_mlp ? layers : 0);
  for (auto* v : {&qs_, &ks_, &vs_, &ps_, &os_, &mids_}) v->resize(c_.attention() ? layers : 0);
  if (c_.embeddings()) {
    ids_ = BatchTokenIds(c_, step_, 0, b);
    targets_ = TargetIds(c_, ids_);
    xs_[0] = Embedded(c_, weights_, ids_);
  } else {
    xs_[0] = BatchTokens(c_, step_, 0, b);
    // Teacher targets.
    y_ = xs_[0];
    ForwardPass(c_, teacher_, y_, threads_);
  }

  // Forward, keeping every layer's input, activation and its derivative
  // (the pre-activation goes first into the derivative's buffer).
  // The MLP's input: the layer's, or attention's output.
  auto mlp_in = [&](int l) -> const std::vector<float>& { return c_.attention() ? mids_[l] : xs_[l]; };
  for (int l = 0; l < layers; ++l) {
    if (c_.attention()) AttentionForwardKeep(l);
    as_[l].resize(b * f);
    grads_[l].resize(b * f);
    xs_[l + 1].resize(b * d);
    float* h = grads_[l].data();
    MatMul(mlp_in(l).data(), b, d, false, weights_.win[l].data(), d, f, false, h, nullptr, threads_);
    ParallelFor(b * f, threads_, [&](int64_t i, int64_t end) { ActivateWithGrad(act, h + i, end - i, &as_[l][i], h + i); });
    const float* a = as_[l].data();
    if (c_.gated_mlp) {
      us_[l].resize(b * f);
      Multiply(mlp_in(l).data(), b, d, weights_.wup[l], f, us_[l].data(), threads_);
      gated_.resize(b * f);
      ParallelFor(b * f, threads_, [&](int64_t i, int64_t end) {
        for (; i < end; ++i) gated_[i] = as_[l][i] * us_[l][i];
      });
      a = gated_.data();
    }
    MatMul(a, b, f, false, weights_.wout[l].data(), f, d, false, xs_[l + 1].data(), nullptr, threads_);
  }
  // Adam's step count, from 1.
  ++step_;
  double loss = 0;
  dx_.resize(b * d);
  if (c_.embeddings()) {
    loss = VocabLossUpdate();
  } else {
    const double scale = 1.0 / static_cast<double>(b * d);
    for (int64_t i = 0; i < b * d; ++i) {
      const double e = static_cast<double>(xs_[layers][i]) - y_[i];
      loss += e * e;
      dx_[i] = static_cast<float>(2 * e * scale);
    }
    loss *= scale;
  }

  // Backward and update, last layer first.
  da_.resize(b * f);
  dwout_.resize(f * d);
  dwin_.resize(d * f);
  dprev_.resize(b * d);
  for (int l = layers - 1; l >= 0; --l) {
    const float* grad = grads_[l].data();
    const float* a = as_[l].data();
    if (c_.gated_mlp) {  // G = A * U, Wout's input
      gated_.resize(b * f);
      ParallelFor(b * f, threads_, [&](int64_t i, int64_t end) {
        for (; i < end; ++i) gated_[i] = as_[l][i] * us_[l][i];
      });
      a = gated_.data();
    }
    MatMul(a, b, f, true, dx_.data(), b, d, false, dwout_.data(), nullptr, threads_);  // dWout = A^T dOut
    MatMul(dx_.data(), b, d, false, weights_.wout[l].data(), f, d, true, da_.data(), nullptr, threads_);  // dA
    if (c_.gated_mlp) {
      // dU = dG * A; dH = dG * U * act'(H)
      du_.resize(b * f);
      const float* u = us_[l].data();
      ParallelFor(b * f, threads_, [&](int64_t i, int64_t end) {
        for (; i < end; ++i) {
          du_[i] = da_[i] * as_[l][i];
          da_[i] = da_[i] * u[i] * grad[i];
        }
      });
    } else {
      ParallelFor(b * f, threads_, [&](int64_t i, int64_t end) {
        for (; i < end; ++i) da_[i] *= grad[i];  // dH
      });
    }
    MatMul(mlp_in(l).data(), b, d, true, da_.data(), b, f, false, dwin_.data(), nullptr, threads_);  // dWin = X^T dH
    const bool dx_read = l > 0 || c_.first_mlp_input_gradient_read();
    if (dx_read) {
      MatMul(da_.data(), b, f, false, weights_.win[l].data(), d, f, true, dprev_.data(), nullptr, threads_);  // dX
    }
    if (c_.gated_mlp) {
      dwup_.resize(d * f);
      MatMul(mlp_in(l).data(), b, d, true, du_.data(), b, f, false, dwup_.data(), nullptr, threads_);  // dWup = X^T dU
    }
    if (c_.gated_mlp && dx_read) {
      // dX += dU Wup^T
      gated_.resize(b * d);
      MatMul(du_.data(), b, f, false, weights_.wup[l].data(), d, f, true, gated_.data(), nullptr, threads_);
      ParallelFor(b * d, threads_, [&](int64_t i, int64_t end) {
        for (; i < end; ++i) dprev_[i] += gated_[i];
      });
    }
    Update(weights_.wout[l], dwout_, m_.wout[l], v_.wout[l]);
    Update(weights_.win[l], dwin_, m_.win[l], v_.win[l]);
    if (c_.gated_mlp) Update(weights_.wup[l], dwup_, m_.wup[l], v_.wup[l]);
    if (c_.attention()) AttentionBackwardUpdate(l, dprev_);
    std::swap(dx_, dprev_);
  }
  if (c_.embeddings()) {  // dx_ is the embedded tokens' gradient
    std::vector<float> de(weights_.embed[0].size(), 0.0f);
    EmbeddingGradient(dx_.data(), 0, c_.vocab_size, d, ids_.data(), b, de.data());
    Update(weights_.embed[0], de, m_.embed[0], v_.embed[0]);
  }
  return {step_ - 1, loss};
}

double ReferenceTrainer::VocabLossUpdate() {
  const int64_t b = c_.global_batch_tokens, d = c_.emb_dim, v = c_.vocab_size;
  const std::vector<float>& x = xs_[c_.num_layers];
  std::vector<float> lse;
  const double loss = CrossEntropySum(c_, weights_, x, targets_, logits_, lse, threads_);
  dlogits_.resize(b * v);
  LogitGradient(logits_.data(), b, v, 0, targets_.data(), lse.data(), 1.0f / static_cast<float>(b), dlogits_.data());
  auto& wv = weights_.vocab[c_.num_layers - 1];
  std::vector<float> dwv(d * v);
  MatMul(x.data(), b, d, true, dlogits_.data(), b, v, false, dwv.data(), nullptr, threads_);  // dWv = X^T dZ
  MatMul(dlogits_.data(), b, v, false, wv.data(), d, v, true, dx_.data(), nullptr, threads_);  // dX = dZ Wv^T
  Update(wv, dwv, m_.vocab[c_.num_layers - 1], v_.vocab[c_.num_layers - 1]);
  return loss / static_cast<double>(b);
}

void ReferenceTrainer::AttentionForwardKeep(int l) {
  const int64_t b = c_.global_batch_tokens, d = c_.emb_dim;
  const AttentionShape s = AttentionOf(c_, b);
  qs_[l].resize(b * s.q_width());
  ks_[l].resize(b * s.kv_width());
  vs_[l].resize(b * s.kv_width());
  ps_[l].resize(s.prob_elements());
  os_[l].resize(b * s.q_width());
  mids_[l].resize(b * d);
  Multiply(xs_[l].data(), b, d, weights_.wq[l], s.q_width(), qs_[l].data(), threads_);
  Multiply(xs_[l].data(), b, d, weights_.wk[l], s.kv_width(), ks_[l].data(), threads_);
  Multiply(xs_[l].data(), b, d, weights_.wv[l], s.kv_width(), vs_[l].data(), threads_);
  AttentionForward(s, qs_[l].data(), ks_[l].data(), vs_[l].data(), ps_[l].data(), os_[l].data());
  Multiply(os_[l].data(), b, s.q_width(), weights_.wo[l], d, mids_[l].data(), threads_);
}

void ReferenceTrainer::AttentionBackwardUpdate(int l, std::vector<float>& dx) {
  const int64_t b = c_.global_batch_tokens, d = c_.emb_dim;
  const AttentionShape s = AttentionOf(c_, b);
  const int64_t qw = s.q_width(), kvw = s.kv_width();
  std::vector<float> dwo(qw * d), d_o(b * qw), dq(b * qw), dk(b * kvw), dv(b * kvw), dw(d * qw), part(b * d);
  MatMul(os_[l].data(), b, qw, true, dx.data(), b, d, false, dwo.data(), nullptr, threads_);  // dWo = O^T dMid
  MatMul(dx.data(), b, d, false, weights_.wo[l].data(), qw, d, true, d_o.data(), nullptr, threads_);  // dO
  AttentionBackward(s, qs_[l].data(), ks_[l].data(), vs_[l].data(), ps_[l].data(), d_o.data(), dq.data(), dk.data(),
                    dv.data());
  Update(weights_.wo[l], dwo, m_.wo[l], v_.wo[l]);
  // dX = dQ Wq^T + dK Wk^T + dV Wv^T, each weight's gradient X^T dP, updated
  // once its product is made (it reads the weight before the update).
  const std::pair<Matrix, const std::vector<float>*> parts[] = {
      {Matrix::kQuery, &dq}, {Matrix::kKey, &dk}, {Matrix::kValue, &dv}};
  for (const auto& [m, grad] : parts) {
    const int64_t width = MatrixWidth(c_, m);
    auto& w = weights_.of(m)[l];
    float* into = m == Matrix::kQuery ? dx.data() : part.data();
    MatMul(grad->data(), b, width, false, w.data(), d, width, true, into, nullptr, threads_);
    if (m != Matrix::kQuery) {
      ParallelFor(b * d, threads_, [&](int64_t i, int64_t end) {
        for (; i < end; ++i) dx[i] += part[i];
      });
    }
    dw.resize(d * width);
    MatMul(xs_[l].data(), b, d, true, grad->data(), b, width, false, dw.data(), nullptr, threads_);
    Update(w, dw, m_.of(m)[l], v_.of(m)[l]);
  }
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
