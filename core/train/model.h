// Seed 001's simplified Transformer on one device (DESIGN §6): L blocks of
// In[B, D] * Win[D, F] -> activation -> * Wout[F, D], trained with a mean
// squared error against a fixed random teacher of the same shape. Weights,
// teacher and batches are deterministic in (seed, what, index), so any shard
// of any of them can be made anywhere; the sharded strategies and this
// one-device reference see exactly the same numbers.
#pragma once

#include <cstdint>
#include <vector>

#include "core/base/splitmix.h"
#include "core/train/config.h"

namespace tpuemu {

// A block's matrices: Win [D, F], Wup [D, F] (a gated MLP's second
// up-projection, multiplied into Win's activation), Wout [F, D].
enum class Matrix { kIn = 0, kUp = 1, kOut = 2 };
inline constexpr int kMatrixKinds = 3;
// The matrices of a block of `config`'s model, in the order they are used forward.
std::vector<Matrix> BlockMatrices(const TrainConfig& config);
// Laid out as Win ([D, F]): Win and Wup.
inline bool AlongD(Matrix m) { return m != Matrix::kOut; }

// Row-major weights of every layer: win[l] and wup[l] (gated MLPs; else
// empty) are D x F, wout[l] is F x D.
struct ModelWeights {
  std::vector<std::vector<float>> win, wup, wout;
};

enum class WeightStream { kStudent = 0, kTeacher = 1 };

// The elements of layer `layer`'s matrix `m`, by row-major index: the hashes
// that depend only on the matrix are made once here, not once per element.
class LayerWeights {
 public:
  LayerWeights(const TrainConfig& c, WeightStream stream, int layer, Matrix m);
  float operator()(int64_t index) const {
    return scale_ * UnitFloat(SplitMix64(key_ ^ (matrix_ ^ static_cast<uint64_t>(index))));
  }

 private:
  float scale_;
  uint64_t key_, matrix_;
};
ModelWeights InitWeights(const TrainConfig& c, WeightStream stream);

// x (B x D, row-major) <- the model's output on x, forward only.
void ForwardPass(const TrainConfig& c, const ModelWeights& weights, std::vector<float>& x);

// The loss of `weights` on the batch of `step` (forward only).
double BatchLoss(const TrainConfig& c, const ModelWeights& weights, int step);

// Sum of squares of every weight (the final parameters' checksum).
double SumOfSquares(const ModelWeights& w);

// Tokens [first, first + count) of the batch of `step`: count x D, row-major.
std::vector<float> BatchTokens(const TrainConfig& c, int step, int64_t first, int64_t count);

struct StepRecord {
  int step = 0;
  double loss = 0;  // before the update, over the whole batch
};

// One device: forward, backward and optimizer step, in fp32. `threads`
// share its multiplies and elementwise work; the results do not depend on
// how many (BLIS splits a product's rows and columns, never its sums).
class ReferenceTrainer {
 public:
  explicit ReferenceTrainer(const TrainConfig& config, int threads = 1);
  StepRecord Step();  // the next step
  const ModelWeights& weights() const { return weights_; }

 private:
  void Update(std::vector<float>& w, const std::vector<float>& g, std::vector<float>& m, std::vector<float>& v);

  TrainConfig c_;
  int threads_;
  ModelWeights weights_;
  ModelWeights teacher_;
  ModelWeights m_, v_;  // Adam moments
  int step_ = 0;
  // Kept from step to step (a fresh vector of this size each time cost as
  // much in page faults and zeroing as the elementwise work itself): each
  // layer's input, activation and activation derivative (and, gated, the
  // up-projection); the backward pass's scratch.
  std::vector<std::vector<float>> xs_, as_, grads_, us_;
  std::vector<float> y_, dx_, da_, du_, gated_, dwout_, dwin_, dwup_, dprev_;
};

}  // namespace tpuemu
