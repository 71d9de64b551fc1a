// A job's abort stops a chip's multiply between blocks of rows: a failed
// job's survivors do not finish a product that takes seconds.
#include <cmath>
#include <thread>
#include <vector>

#include "core/tensor/gemm.h"
#include "core/wire/job_abort.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

TEST(GemmAbortTest, AnAbortedMultiplyStopsBetweenBlocksAndLeavesTheRestUnwritten) {
  // 2 x 2048 x 4096 x 4096 flops: 4 blocks of 512 rows and 17 GFLOP, about
  // half a second on one core.
  const int64_t m = 2048, k = 4096, n = 4096;
  std::vector<float> a(m * k, 1.0f), b(k * n, 1.0f), c(m * n, NAN);
  JobAbort abort;
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    abort.Abort(absl::AbortedError("a worker was lost"));
  });
  GemmUnlessAborted(MatrixView{a.data(), m, k, k, 1}, MatrixView{b.data(), k, n, n, 1},
                    MutableMatrixView{c.data(), m, n, n, 1}, abort);
  aborter.join();
  // 64 GFLOP cannot be done in 50 ms: the last rows were never computed.
  EXPECT_TRUE(std::isnan(c[(m - 1) * n]));
  EXPECT_EQ(abort.status().message(), "a worker was lost");
}

TEST(GemmAbortTest, WithoutAnAbortTheBlockedProductIsTheWholeProduct) {
  // Blocks of 512 rows here (2 k n flops a row): 512, 512 and 76.
  const int64_t m = 1100, k = 2900, n = 2900;
  std::vector<float> a(m * k), b(k * n), blocked(m * n), whole(m * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 7) - 3;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 5) - 2;
  JobAbort never;
  GemmUnlessAborted(MatrixView{a.data(), m, k, k, 1}, MatrixView{b.data(), k, n, n, 1},
                    MutableMatrixView{blocked.data(), m, n, n, 1}, never);
  Gemm(MatrixView{a.data(), m, k, k, 1}, MatrixView{b.data(), k, n, n, 1}, MutableMatrixView{whole.data(), m, n, n, 1});
  EXPECT_EQ(blocked, whole);
}

TEST(GemmAbortTest, APacedWaitEndsAtTheAbort) {
  JobAbort abort;
  std::thread aborter([&] { abort.Abort(absl::AbortedError("cancelled")); });
  EXPECT_FALSE(abort.SleepUntil(WallClock::now() + std::chrono::hours(1)));
  aborter.join();
  JobAbort never;
  EXPECT_TRUE(never.SleepUntil(WallClock::now() + std::chrono::milliseconds(1)));
}

}  // namespace
}  // namespace tpuemu
