// Local matrix products with BLIS (DESIGN §1: every chip multiplies its
// blocks with BLIS), on one thread: each emulated chip is one CPU thread.
#pragma once

#include <cstdint>

namespace tpuemu {

// A strided matrix view: element (r, c) is at data[r * rs + c * cs].
struct MatrixView {
  const float* data = nullptr;
  int64_t rows = 0, cols = 0, rs = 0, cs = 0;
};

struct MutableMatrixView {
  float* data = nullptr;
  int64_t rows = 0, cols = 0, rs = 0, cs = 0;
};

// c = a * b (c is overwritten). Shapes must agree.
void Gemm(const MatrixView& a, const MatrixView& b, const MutableMatrixView& c);

}  // namespace tpuemu
