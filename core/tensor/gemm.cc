#include "core/tensor/gemm.h"

#include <blis.h>

#include <algorithm>

#include "core/tensor/blis_kernel.h"
#include "core/tensor/matmul_gate.h"

namespace tpuemu {

namespace {

// Each block of rows packs the whole right-hand matrix again (BLIS packs
// it once per call), which costs about what 64 rows of multiply do. With
// 2^30 flops per block a [1024 x 1024] x [1024 x 4096] product went in
// blocks of 128 rows and BLIS ran at two thirds of its speed. Blocks of
// about 8 GFLOP (50 ms of one core at AVX-512 speed) and at least 512 rows
// keep the repacking under a tenth, and an abort is still seen within a
// fraction of a second.
constexpr int64_t kBlockFlops = int64_t{1} << 33;
constexpr int64_t kMinBlockRows = 512;

void Blis(const MatrixView& a, const MatrixView& b, const MutableMatrixView& c, int threads) {
  // The threads asked for, whatever BLIS_NUM_THREADS or OMP_NUM_THREADS say:
  // the chips of a host already run one thread each.
  const MatmulGate::Pass pass = ProcessMatmulGate().Enter(threads);
  rntm_t rntm = BLIS_RNTM_INITIALIZER;
  bli_rntm_set_num_threads(threads, &rntm);
  float one = 1.0f, zero = 0.0f;
  bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, c.rows, c.cols, a.cols, &one, const_cast<float*>(a.data), a.rs,
               a.cs, const_cast<float*>(b.data), b.rs, b.cs, &zero, c.data, c.rs, c.cs, nullptr, &rntm);
}

}  // namespace

void Gemm(const MatrixView& a, const MatrixView& b, const MutableMatrixView& c) { GemmOnThreads(a, b, c, 1); }

void GemmOnThreads(const MatrixView& a, const MatrixView& b, const MutableMatrixView& c, int threads) {
  EnsureBlisKernel();
  Blis(a, b, c, threads);
}

void GemmUnlessAborted(const MatrixView& a, const MatrixView& b, const MutableMatrixView& c, const JobAbort& abort) {
  EnsureBlisKernel();
  const int64_t row_flops = std::max<int64_t>(1, 2 * c.cols * a.cols);
  const int64_t rows = std::max(kMinBlockRows, kBlockFlops / row_flops);
  for (int64_t first = 0; first < c.rows && !abort.aborted(); first += rows) {
    const int64_t n = std::min(rows, c.rows - first);
    BlisGemm(MatrixView{a.data + first * a.rs, n, a.cols, a.rs, a.cs}, b,
             MutableMatrixView{c.data + first * c.rs, n, c.cols, c.rs, c.cs});
  }
}

void BlisGemm(const MatrixView& a, const MatrixView& b, const MutableMatrixView& c) { Blis(a, b, c, 1); }

void MatMul(const float* a, int64_t ar, int64_t ac, bool at, const float* b, int64_t br, int64_t bc, bool bt,
            float* c, const JobAbort* abort, int threads) {
  const MatrixView va{a, at ? ac : ar, at ? ar : ac, at ? 1 : ac, at ? ac : 1};
  const MatrixView vb{b, bt ? bc : br, bt ? br : bc, bt ? 1 : bc, bt ? bc : 1};
  const MutableMatrixView vc{c, va.rows, vb.cols, vb.cols, 1};
  if (abort != nullptr) return GemmUnlessAborted(va, vb, vc, *abort);
  GemmOnThreads(va, vb, vc, threads);
}

}  // namespace tpuemu
