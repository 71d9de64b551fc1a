#include "core/train/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/tensor/gemm.h"

namespace tpuemu {
namespace {

// Head h's columns of sequence `seq` in a [rows, heads * head_dim] array.
MatrixView Head(const AttentionShape& s, const float* a, int64_t width, int64_t seq, int64_t h) {
  return {a + seq * s.seq_len * width + h * s.head_dim, s.seq_len, s.head_dim, width, 1};
}
MutableMatrixView MutableHead(const AttentionShape& s, float* a, int64_t width, int64_t seq, int64_t h) {
  return {a + seq * s.seq_len * width + h * s.head_dim, s.seq_len, s.head_dim, width, 1};
}
MatrixView Transposed(MatrixView m) { return {m.data, m.cols, m.rows, m.cs, m.rs}; }
MatrixView Square(const float* a, int64_t t) { return {a, t, t, t, 1}; }
MutableMatrixView MutableSquare(float* a, int64_t t) { return {a, t, t, t, 1}; }

// dst += src, a [seq_len, head_dim] block into a head's columns.
void AddInto(const AttentionShape& s, const std::vector<float>& src, const MutableMatrixView& dst) {
  for (int64_t r = 0; r < s.seq_len; ++r) {
    for (int64_t c = 0; c < s.head_dim; ++c) dst.data[r * dst.rs + c] += src[r * s.head_dim + c];
  }
}

}  // namespace

void AttentionForward(const AttentionShape& s, const float* q, const float* k, const float* v, float* p, float* o) {
  const int64_t t = s.seq_len, group = s.q_heads / s.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  for (int64_t seq = 0; seq < s.seqs; ++seq) {
    for (int64_t h = 0; h < s.q_heads; ++h) {
      float* probs = p + (seq * s.q_heads + h) * t * t;
      const int64_t g = h / group;
      Gemm(Head(s, q, s.q_width(), seq, h), Transposed(Head(s, k, s.kv_width(), seq, g)), MutableSquare(probs, t));
      // Row i attends to positions 0..i: a softmax over them, the rest 0.
      for (int64_t i = 0; i < t; ++i) {
        float* row = probs + i * t;
        float top = row[0] * scale;
        for (int64_t j = 1; j <= i; ++j) top = std::max(top, row[j] * scale);
        float sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          row[j] = std::exp(row[j] * scale - top);
          sum += row[j];
        }
        for (int64_t j = 0; j <= i; ++j) row[j] /= sum;
        std::fill(row + i + 1, row + t, 0.0f);
      }
      Gemm(Square(probs, t), Head(s, v, s.kv_width(), seq, g), MutableHead(s, o, s.q_width(), seq, h));
    }
  }
}

void AttentionBackward(const AttentionShape& s, const float* q, const float* k, const float* v, const float* p,
                       const float* d_out, float* dq, float* dk, float* dv) {
  const int64_t t = s.seq_len, group = s.q_heads / s.kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  std::fill(dk, dk + s.rows() * s.kv_width(), 0.0f);
  std::fill(dv, dv + s.rows() * s.kv_width(), 0.0f);
  std::vector<float> dp(t * t), part(t * s.head_dim);
  const MutableMatrixView part_view{part.data(), t, s.head_dim, s.head_dim, 1};
  for (int64_t seq = 0; seq < s.seqs; ++seq) {
    for (int64_t h = 0; h < s.q_heads; ++h) {
      const float* probs = p + (seq * s.q_heads + h) * t * t;
      const int64_t g = h / group;
      const MatrixView d_head = Head(s, d_out, s.q_width(), seq, h);
      // dV_g += P^T dO_h, dP = dO_h V_g^T.
      Gemm(Transposed(Square(probs, t)), d_head, part_view);
      AddInto(s, part, MutableHead(s, dv, s.kv_width(), seq, g));
      Gemm(d_head, Transposed(Head(s, v, s.kv_width(), seq, g)), MutableSquare(dp.data(), t));
      // dS = P * (dP - sum_j P dP) / sqrt(head_dim): the softmax's gradient,
      // 0 where the mask made P 0.
      for (int64_t i = 0; i < t; ++i) {
        const float* pr = probs + i * t;
        float* row = dp.data() + i * t;
        float dot = 0;
        for (int64_t j = 0; j <= i; ++j) dot += pr[j] * row[j];
        for (int64_t j = 0; j <= i; ++j) row[j] = pr[j] * (row[j] - dot) * scale;
        std::fill(row + i + 1, row + t, 0.0f);
      }
      // dQ_h = dS K_g, dK_g += dS^T Q_h.
      Gemm(Square(dp.data(), t), Head(s, k, s.kv_width(), seq, g), MutableHead(s, dq, s.q_width(), seq, h));
      Gemm(Transposed(Square(dp.data(), t)), Head(s, q, s.q_width(), seq, h), part_view);
      AddInto(s, part, MutableHead(s, dk, s.kv_width(), seq, g));
    }
  }
}

}  // namespace tpuemu
