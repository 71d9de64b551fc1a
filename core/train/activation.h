// The block's nonlinearity, applied to whole arrays: chosen once per job
// (not by name per element) and, for training, its value and derivative
// from one transcendental per element (gelu's tanh, silu's exp), where
// computing them separately took three (forward, then both again in the
// backward pass). Bit for bit the same numbers either way.
#pragma once

#include <cstdint>
#include <string>

namespace tpuemu {

enum class Activation { kLinear, kRelu, kTanh, kSilu, kGelu };

// The name a job file gives (relu | gelu | silu | tanh | linear; checked
// when the job is parsed): anything else is linear.
Activation ActivationNamed(const std::string& name);

// a[i] = f(h[i]) for i < n; a may be h.
void Activate(Activation f, const float* h, int64_t n, float* a);

// a[i] = f(h[i]) and grad[i] = f'(h[i]) for i < n; grad may be h (each
// h[i] is read before grad[i] is written), a may not.
void ActivateWithGrad(Activation f, const float* h, int64_t n, float* a, float* grad);

}  // namespace tpuemu
