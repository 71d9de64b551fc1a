// Local matmul speed: a chip's multiply inside a real matmul job (through
// the planner, the chip's blocks, BLIS behind tpuemu::Gemm) against bare BLIS
// sgemm on the same shapes, side by side in one run. Both run one matmul per
// core at once (2 chips, 2 threads), as a host's chips do.
//   build/bin/matmul_bench [max_local_size]
#include <blis.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/inprocess_pod.h"

namespace tpuemu {
namespace {

using Clock = std::chrono::steady_clock;

// Bare BLIS: each thread multiplies its own n x n matrices, single-threaded BLIS.
double BareGflopsPerCore(int64_t n, int threads) {
  std::vector<double> best(threads, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<float> a(n * n), b(n * n), c(n * n);
      for (int64_t i = 0; i < n * n; ++i) {
        a[i] = static_cast<float>((i * 7 + t) % 13) - 6;
        b[i] = static_cast<float>((i * 5 + t) % 11) - 5;
      }
      rntm_t rntm = BLIS_RNTM_INITIALIZER;
      bli_rntm_set_num_threads(1, &rntm);
      float one = 1, zero = 0;
      {
        const auto start = Clock::now();
        bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, n, n, n, &one, a.data(), n, 1, b.data(), n, 1, &zero,
                     c.data(), n, 1, nullptr, &rntm);
        const double s = std::chrono::duration<double>(Clock::now() - start).count();
        best[t] = std::max(best[t], 2.0 * n * n * n / s / 1e9);
      }
    });
  }
  for (auto& th : pool) th.join();
  return *std::min_element(best.begin(), best.end());
}

// The product as a job on a 2-chip pod: C[I_X, K] = A[I_X, J] * B[J, K]
// has no communication and gives each chip an n x n x n local multiply.
double ChipGflopsPerCore(int64_t n) {
  auto topo = Topology::Create({"v5p:2", 1, 2, "auto"});
  InProcessPod pod(*topo, 0);
  MatmulSpec spec;
  spec.expr = "A[I_X, J] * B[J, K] -> C[I_X, K]";
  spec.dims = absl::StrCat("I=", 2 * n, ",J=", n, ",K=", n);
  double best = 0;
  {
    auto r = pod.RunMatmul(spec);
    if (!r.ok() || !r->correct) {
      std::fprintf(stderr, "matmul failed: %s\n", r.ok() ? "wrong result" : std::string(r.status().message()).c_str());
      std::exit(1);
    }
    // wall_s: the slowest chip's steps (here just its multiply), checks excluded.
    best = std::max(best, static_cast<double>(r->flops_per_chip) / r->wall_s / 1e9);
  }
  return best;
}

}  // namespace
}  // namespace tpuemu

int main(int argc, char** argv) {
  const int64_t max_n = argc > 1 ? std::atoll(argv[1]) : 2048;
  // The two are measured in turns, so that a noisy neighbour slows both.
  constexpr int kRounds = 5;
  std::printf("local n^3 matmul, 2 at once (one per core), best of %d taken in turns, GFLOP/s per core\n", kRounds);
  std::printf("%6s %14s %14s %8s\n", "n", "bare BLIS", "tpuemu chip", "ratio");
  for (int64_t n = 512; n <= max_n; n *= 2) {
    double bare = 0, chip = 0;
    for (int round = 0; round < kRounds; ++round) {
      bare = std::max(bare, tpuemu::BareGflopsPerCore(n, 2));
      chip = std::max(chip, tpuemu::ChipGflopsPerCore(n));
    }
    std::printf("%6lld %14.1f %14.1f %8.3f\n", static_cast<long long>(n), bare, chip, chip / bare);
  }
  return 0;
}
