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
#include <vector>

namespace tpuemu {

// out[i] = tanhf(in[i]) for i < n, bit for bit; out may be in. Runs the
// fastest build this CPU can run.
void TanhArray(const float* in, int64_t n, float* out);

// Each build of TanhArray's kernel this CPU can run ("avx512", "avx2",
// "baseline"), fastest first: the tests check every one, not only the one
// the machine they run on would choose.
struct TanhBuild {
  using Kernel = void (*)(const float* in, int64_t n, float* out);
  const char* name;
  Kernel kernel;
};
std::vector<TanhBuild> TanhBuildsThisCpuRuns();

}  // namespace tpuemu
