// Local matrix products with BLIS (DESIGN §1: every chip multiplies its
// blocks with BLIS), on one thread unless told otherwise: each emulated chip
// is one CPU thread; the one-device reference may use every core.
#pragma once

#include <cstdint>

#include "core/wire/job_abort.h"

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

// c = a * b (c is overwritten). Shapes must agree. The first call chooses
// BLIS's kernels for the process (core/blis_kernel.h).
void Gemm(const MatrixView& a, const MatrixView& b, const MutableMatrixView& c);

// Gemm on `threads` threads: the same numbers bit for bit (BLIS splits the
// product's rows and columns among them, never a sum).
void GemmOnThreads(const MatrixView& a, const MatrixView& b, const MutableMatrixView& c, int threads);

// Gemm in blocks of rows that stops between two blocks once the job is
// aborted (c is then partly written): a chip's block of a big matmul takes
// seconds, which a failed job's survivors should not spend.
void GemmUnlessAborted(const MatrixView& a, const MatrixView& b, const MutableMatrixView& c, const JobAbort& abort);

// Gemm without choosing kernels first: for the kernels' self-test, which
// runs before the choice is made.
void BlisGemm(const MatrixView& a, const MatrixView& b, const MutableMatrixView& c);

// c = op(a) * op(b) for row-major a (ar x ac) and b (br x bc), each read as
// it is or transposed; c is row-major and overwritten. With an abort, on one
// thread.
void MatMul(const float* a, int64_t ar, int64_t ac, bool at, const float* b, int64_t br, int64_t bc, bool bt,
            float* c, const JobAbort* abort = nullptr, int threads = 1);

}  // namespace tpuemu
