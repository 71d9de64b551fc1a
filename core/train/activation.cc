#include "core/train/activation.h"

#include <cmath>

namespace tpuemu {
namespace {

// gelu's tanh approximation: sqrt(2 / pi) and the cubic term's weight.
constexpr float kGeluK = 0.7978845608f, kGeluC = 0.044715f;

// Each activation once, as a value and (when Grad) a derivative: the same
// expressions in the same order whether or not the derivative is wanted, so
// a forward-only pass (the teacher, the loss) and a training pass agree.
template <bool Grad>
void Apply(Activation f, const float* h, int64_t n, float* a, float* grad) {
  switch (f) {
    case Activation::kRelu:
      for (int64_t i = 0; i < n; ++i) {
        const float x = h[i];
        a[i] = x > 0 ? x : 0;
        if constexpr (Grad) grad[i] = x > 0 ? 1.0f : 0.0f;
      }
      return;
    case Activation::kTanh:
      for (int64_t i = 0; i < n; ++i) {
        const float t = std::tanh(h[i]);
        a[i] = t;
        if constexpr (Grad) grad[i] = 1 - t * t;
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
      for (int64_t i = 0; i < n; ++i) {
        const float x = h[i];
        const float t = std::tanh(kGeluK * (x + kGeluC * x * x * x));
        a[i] = 0.5f * x * (1 + t);
        if constexpr (Grad) grad[i] = 0.5f * (1 + t) + 0.5f * x * (1 - t * t) * kGeluK * (1 + 3 * kGeluC * x * x);
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

void Activate(Activation f, const float* h, int64_t n, float* a) { Apply<false>(f, h, n, a, nullptr); }

void ActivateWithGrad(Activation f, const float* h, int64_t n, float* a, float* grad) {
  Apply<true>(f, h, n, a, grad);
}

}  // namespace tpuemu
