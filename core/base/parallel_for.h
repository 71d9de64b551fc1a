// Elementwise work over [0, n) split into contiguous parts, one per thread:
// for the one-device reference, whose loops are independent per element (so
// the results do not depend on the split).
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace tpuemu {

// fn(begin, end) for each part; returns once every part is done. Parts
// smaller than `grain` are not worth a thread: fewer threads are used.
template <typename Fn>
void ParallelFor(int64_t n, int threads, Fn fn, int64_t grain = 1 << 16) {
  const int64_t parts = std::clamp<int64_t>(n / std::max<int64_t>(grain, 1), 1, std::max(threads, 1));
  if (parts == 1) return fn(int64_t{0}, n);
  std::vector<std::thread> workers;
  for (int64_t p = 1; p < parts; ++p) workers.emplace_back(fn, n * p / parts, n * (p + 1) / parts);
  fn(int64_t{0}, n / parts);
  for (std::thread& t : workers) t.join();
}

}  // namespace tpuemu
