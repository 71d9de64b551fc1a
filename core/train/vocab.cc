#include "core/train/vocab.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tpuemu {
namespace {

bool InBlock(int64_t id, int64_t first, int64_t width) { return id >= first && id < first + width; }

}  // namespace

void EmbeddingLookup(const float* e, int64_t first, int64_t width, int64_t d, const int64_t* ids, int64_t rows,
                     float* x) {
  for (int64_t r = 0; r < rows; ++r) {
    if (InBlock(ids[r], first, width)) {
      std::memcpy(x + r * d, e + (ids[r] - first) * d, d * sizeof(float));
    } else {
      std::fill(x + r * d, x + (r + 1) * d, 0.0f);
    }
  }
}

void EmbeddingGradient(const float* dx, int64_t first, int64_t width, int64_t d, const int64_t* ids, int64_t rows,
                       float* de) {
  for (int64_t r = 0; r < rows; ++r) {
    if (!InBlock(ids[r], first, width)) continue;
    float* row = de + (ids[r] - first) * d;
    for (int64_t j = 0; j < d; ++j) row[j] += dx[r * d + j];
  }
}

void LogitStats(const float* logits, int64_t rows, int64_t width, int64_t first, const int64_t* targets, float* stats) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits + r * width;
    const float top = *std::max_element(z, z + width);
    double sum = 0;
    for (int64_t j = 0; j < width; ++j) sum += std::exp(static_cast<double>(z[j]) - top);
    stats[r * kLogitStats] = top;
    stats[r * kLogitStats + 1] = static_cast<float>(sum);
    stats[r * kLogitStats + 2] = InBlock(targets[r], first, width) ? z[targets[r] - first] : 0.0f;
  }
}

double CombineLogitStats(const float* all, int64_t rows, int blocks, float* lse) {
  double loss = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = all + r * blocks * kLogitStats;
    float top = s[0];
    for (int b = 1; b < blocks; ++b) top = std::max(top, s[b * kLogitStats]);
    double sum = 0, target = 0;
    for (int b = 0; b < blocks; ++b) {
      sum += static_cast<double>(s[b * kLogitStats + 1]) * std::exp(static_cast<double>(s[b * kLogitStats]) - top);
      target += s[b * kLogitStats + 2];  // one block holds it; the others add 0
    }
    const double row_lse = top + std::log(sum);
    lse[r] = static_cast<float>(row_lse);
    loss += row_lse - target;
  }
  return loss;
}

void LogitGradient(const float* logits, int64_t rows, int64_t width, int64_t first, const int64_t* targets,
                   const float* lse, float scale, float* dlogits) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < width; ++j) {
      dlogits[r * width + j] = scale * std::exp(logits[r * width + j] - lse[r]);
    }
    if (InBlock(targets[r], first, width)) dlogits[r * width + targets[r] - first] -= scale;
  }
}

}  // namespace tpuemu
