// Token ids in and a cross-entropy out (issue 19): the embedding lookup, its
// gradient, and a softmax cross-entropy over a vocabulary that may be split
// in blocks of columns (Megatron's vocabulary parallelism). One set of
// functions for the one-device reference (one block: the whole vocabulary)
// and for every chip (its tensor shard's block): each row's log-sum-exp is
// made from per-block statistics, so a chip needs only a few numbers per row
// from the others, never their logits.
#pragma once

#include <cstdint>

namespace tpuemu {

// The statistics one block sends per row: its largest logit, the sum of
// exp(logit - that largest), and the target's logit (0 where the target is
// in another block).
inline constexpr int64_t kLogitStats = 3;

// x [rows, d] <- the rows of e [width, d] (vocabulary ids [first, first +
// width)) for `ids`; rows whose id is in another block are zero.
void EmbeddingLookup(const float* e, int64_t first, int64_t width, int64_t d, const int64_t* ids, int64_t rows,
                     float* x);
// de [width, d] += dx's rows into the rows of their ids in the block, in row order.
void EmbeddingGradient(const float* dx, int64_t first, int64_t width, int64_t d, const int64_t* ids, int64_t rows,
                       float* de);

// stats [rows, kLogitStats] of logits [rows, width] (ids [first, first + width)).
void LogitStats(const float* logits, int64_t rows, int64_t width, int64_t first, const int64_t* targets, float* stats);
// Each row's log-sum-exp into lse [rows], from every block's stats side by
// side (`all` [rows, blocks x kLogitStats], block by block, as an all-gather
// along columns makes them); returns the rows' summed cross-entropy.
double CombineLogitStats(const float* all, int64_t rows, int blocks, float* lse);
// dlogits [rows, width] = scale (softmax - one-hot of the target).
void LogitGradient(const float* logits, int64_t rows, int64_t width, int64_t first, const int64_t* targets,
                   const float* lse, float scale, float* dlogits);

}  // namespace tpuemu
