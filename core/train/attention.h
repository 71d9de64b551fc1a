// Causal multi-head attention with grouped key-value heads (LLaMA's GQA),
// between the projections: o = softmax(q k^T / sqrt(head_dim), causal) v,
// head by head, each query head reading the key-value head of its group.
// One function for the one-device reference and for every chip: a chip holds
// whole sequences (the batch is sharded by sequence) and whole groups of heads
// (the tensor axis splits query and key-value heads alike), so each (sequence,
// head) is computed by the same calls, in the same order, as on one device.
#pragma once

#include <cstdint>

namespace tpuemu {

struct AttentionShape {
  int64_t seqs = 0, seq_len = 0;  // whole sequences of seq_len rows each
  int64_t q_heads = 0, kv_heads = 0, head_dim = 0;

  int64_t rows() const { return seqs * seq_len; }
  int64_t q_width() const { return q_heads * head_dim; }    // q's and o's columns
  int64_t kv_width() const { return kv_heads * head_dim; }  // k's and v's columns
  // The attention probabilities kept for the backward pass: seqs x q_heads x T x T.
  int64_t prob_elements() const { return seqs * q_heads * seq_len * seq_len; }
  // Multiply-adds of the two products per head (q k^T and p v), counted
  // whole: the masked half is computed too. Backward does twice as many.
  double ForwardFlops() const { return 4.0 * static_cast<double>(seqs * q_heads) * seq_len * seq_len * head_dim; }
};

// q [rows, q_width], k and v [rows, kv_width], row-major; writes p (the
// probabilities) and o [rows, q_width].
void AttentionForward(const AttentionShape& s, const float* q, const float* k, const float* v, float* p, float* o);

// From the output's gradient do [rows, q_width] and what the forward pass
// kept: dq [rows, q_width], dk and dv [rows, kv_width] (overwritten).
void AttentionBackward(const AttentionShape& s, const float* q, const float* k, const float* v, const float* p,
                       const float* d_out, float* dq, float* dk, float* dv);

}  // namespace tpuemu
