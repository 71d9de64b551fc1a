// Seed 001's simplified Transformer on one device (DESIGN §6): L blocks of
// In[B, D] * Win[D, F] -> activation -> * Wout[F, D], trained with a mean
// squared error against a fixed random teacher of the same shape; or, with a
// vocabulary, token ids embedded, the blocks, the vocabulary projection and
// a cross-entropy against each token's target id (vocab.h). Weights,
// teacher and batches are deterministic in (seed, what, index), so any shard
// of any of them can be made anywhere; the sharded strategies and this
// one-device reference see exactly the same numbers.
#pragma once

#include <cstdint>
#include <vector>

#include "core/base/splitmix.h"
#include "core/train/attention.h"
#include "core/train/config.h"

namespace tpuemu {

// A block's matrices: the MLP's Win [D, F], Wup [D, F] (a gated MLP's second
// up-projection, multiplied into Win's activation), Wout [F, D]; with
// attention, before them, Wq [D, N H], Wk and Wv [D, K H], Wo [N H, D].
// With a vocabulary, the first layer also holds the embedding E [V, D] and the
// last the vocabulary projection Wv [D, V].
enum class Matrix { kIn = 0, kUp = 1, kOut = 2, kQuery = 3, kKey = 4, kValue = 5, kAttnOut = 6, kEmbed = 7, kVocab = 8 };
inline constexpr int kMatrixKinds = 9;
// The matrices of a block of `config`'s model, in the order they are used forward.
std::vector<Matrix> BlockMatrices(const TrainConfig& config);
// Layer l's: its block's, and the embedding (first layer) and the vocabulary
// projection (last) when the model has a vocabulary.
std::vector<Matrix> LayerMatrices(const TrainConfig& config, int layer);
// Laid out as Win ([D, width]): all but Wout, Wo and E ([width, D]).
inline bool AlongD(Matrix m) { return m != Matrix::kOut && m != Matrix::kAttnOut && m != Matrix::kEmbed; }
// The matrix's other dimension than D (the one the tensor axis splits).
int64_t MatrixWidth(const TrainConfig& c, Matrix m);
// The attention of `rows` rows (whole sequences) on one of `tensor` shards of the heads.
AttentionShape AttentionOf(const TrainConfig& c, int64_t rows, int tensor = 1);

// Row-major weights of every layer, by matrix (empty where the block has
// none): [D, width] along D, else [width, D].
struct ModelWeights {
  std::vector<std::vector<float>> win, wup, wout, wq, wk, wv, wo, embed, vocab;
  std::vector<std::vector<float>>& of(Matrix m);
  const std::vector<std::vector<float>>& of(Matrix m) const;
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

// x (B x D, row-major) <- the model's output on x, forward only, its
// multiplies and elementwise work shared by `threads` (the same bits).
void ForwardPass(const TrainConfig& c, const ModelWeights& weights, std::vector<float>& x, int threads = 1);

// The loss of `weights` on the batch of `step` (forward only).
double BatchLoss(const TrainConfig& c, const ModelWeights& weights, int step);

// Sum of squares of every weight (the final parameters' checksum).
double SumOfSquares(const ModelWeights& w);

// Tokens [first, first + count) of the batch of `step`: count x D, row-major.
std::vector<float> BatchTokens(const TrainConfig& c, int step, int64_t first, int64_t count);
// With a vocabulary: those tokens' ids, and each id's target (a fixed map
// of the vocabulary onto itself that the model learns), both in [0, V).
std::vector<int64_t> BatchTokenIds(const TrainConfig& c, int step, int64_t first, int64_t count);
std::vector<int64_t> TargetIds(const TrainConfig& c, const std::vector<int64_t>& ids);

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
  // Layer l's attention on xs_[l] into mids_[l], keeping what the backward
  // pass needs; and that pass from dx (mids_[l]'s gradient) into dx (xs_[l]'s).
  void AttentionForwardKeep(int l);
  void AttentionBackwardUpdate(int l, std::vector<float>& dx);
  // The vocabulary projection and cross-entropy of the last layer's output:
  // the loss, dx_ (that output's gradient) and Wv updated.
  double VocabLossUpdate();

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
  // With attention, by layer: q, k, v, the probabilities, o, and the MLP's input.
  std::vector<std::vector<float>> qs_, ks_, vs_, ps_, os_, mids_;
  std::vector<float> y_, dx_, da_, du_, gated_, dwout_, dwin_, dwup_, dprev_;
  // With a vocabulary: the step's ids and targets, the logits and their gradient.
  std::vector<int64_t> ids_, targets_;
  std::vector<float> logits_, dlogits_;
};

}  // namespace tpuemu
