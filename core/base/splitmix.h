// splitmix64: the counter-based hash every deterministic value in tpuemu
// (collective inputs, matmul operands, weights, batches) is drawn from, so
// that any element can be made anywhere without making the others.
#pragma once

#include <cstdint>

namespace tpuemu {

inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1) from the top 24 bits of a hash.
inline float UnitFloat(uint64_t r) {
  return static_cast<float>(static_cast<int64_t>(r >> 40) - (1 << 23)) / static_cast<float>(1 << 23);
}

}  // namespace tpuemu
