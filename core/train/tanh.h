// tanh over whole arrays, vectorised, with exactly the bits of the C
// library's scalar tanhf (glibc's, the fdlibm algorithm: tanh from expm1 of
// 2|x|). gelu and tanh layers spent a fifth of a training step in that scalar
// call; every loss, reference and checkpoint made so far depends on its bits,
// so the vector form repeats its operations lane by lane (the same float
// additions, products and quotients in the same order, no fused multiply-add)
// rather than approximating tanh another way. It also keeps the model's
// numbers the same on a C library whose tanhf rounds differently.
#pragma once

#include <cstdint>

namespace tpuemu {

// out[i] = tanhf(in[i]) for i < n, bit for bit; out may be in.
void TanhArray(const float* in, int64_t n, float* out);

}  // namespace tpuemu
