#include "core/train/activation.h"

#include <algorithm>
#include <cmath>

#include "core/train/tanh.h"

namespace tpuemu {
namespace {

// gelu's tanh approximation: sqrt(2 / pi) and the cubic term's weight.
constexpr float kGeluK = 0.7978845608f, kGeluC = 0.044715f;
// gelu goes in chunks that stay in L1: its tanh's argument, the vector
// tanh over the chunk (tanh.h), then the value and derivative.
constexpr int64_t kGeluChunk = 1024;

// Each activation once, as a value and (when Grad) a derivative: the same
// expressions in the same order whether or not the derivative is wanted, so
// a forward-only pass (the teacher, the loss) and a training pass agree.
template <bool Grad>
[[gnu::always_inline]] inline void Apply(Activation f, const float* h, int64_t n, float* a, float* grad) {
  switch (f) {
    case Activation::kRelu:
      for (int64_t i = 0; i < n; ++i) {
        const float x = h[i];
        a[i] = x > 0 ? x : 0;
        if constexpr (Grad) grad[i] = x > 0 ? 1.0f : 0.0f;
      }
      return;
    case Activation::kTanh:
      TanhArray(h, n, a);
      if constexpr (Grad) {
        for (int64_t i = 0; i < n; ++i) grad[i] = 1 - a[i] * a[i];
      }
      return;
    case Activation::kSilu:
      for (int64_t i = 0; i < n; ++i) {
        const float x = h[i];
        const float e = std::exp(-x);
        a[i] = x / (1 + e);
        if constexpr (Grad) {
          const float s = 1 / (1 + e);
          grad[i] = s * (1 + x * (1 - s));
        }
      }
      return;
    case Activation::kGelu:
      for (int64_t first = 0; first < n; first += kGeluChunk) {
        const int64_t m = std::min(kGeluChunk, n - first);
        const float* x = h + first;
        float t[kGeluChunk];
        for (int64_t i = 0; i < m; ++i) t[i] = kGeluK * (x[i] + kGeluC * x[i] * x[i] * x[i]);
        TanhArray(t, m, t);
        for (int64_t i = 0; i < m; ++i) {
          const float xi = x[i];  // read before a or grad, either of which may be h, is written
          a[first + i] = 0.5f * xi * (1 + t[i]);
          if constexpr (Grad) {
            grad[first + i] = 0.5f * (1 + t[i]) + 0.5f * xi * (1 - t[i] * t[i]) * kGeluK * (1 + 3 * kGeluC * xi * xi);
          }
        }
      }
      return;
    case Activation::kLinear:
      for (int64_t i = 0; i < n; ++i) {
        a[i] = h[i];
        if constexpr (Grad) grad[i] = 1.0f;
      }
      return;
  }
}

}  // namespace

Activation ActivationNamed(const std::string& name) {
  if (name == "relu") return Activation::kRelu;
  if (name == "tanh") return Activation::kTanh;
  if (name == "silu") return Activation::kSilu;
  if (name == "gelu") return Activation::kGelu;
  return Activation::kLinear;
}

// Also built for AVX-512 and AVX2: the same IEEE operations in wider
// vectors (no contraction into fused multiply-adds in this file), the same
// bits.
__attribute__((target_clones("avx512f", "avx2", "default"))) void Activate(Activation f, const float* h, int64_t n,
                                                                         float* a) {
  Apply<false>(f, h, n, a, nullptr);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void ActivateWithGrad(Activation f, const float* h,
                                                                                 int64_t n, float* a, float* grad) {
  Apply<true>(f, h, n, a, grad);
}

}  // namespace tpuemu
