#include "core/collective/data.h"

#include <algorithm>

#include "core/base/splitmix.h"

namespace tpuemu {
namespace {

// Cheap per-element hash (multiply-xorshift) of the element index's low 32
// bits: this runs over every element of every chip's input and result.
inline float G(uint32_t seed_mix, uint64_t j) {
  uint32_t x = static_cast<uint32_t>(j) * 0x9e3779b1u ^ seed_mix;
  x ^= x >> 15;
  x *= 0x2c1b3c6du;
  x ^= x >> 12;
  return static_cast<float>(static_cast<int>(x % 17u) - 8);
}
uint32_t SeedMix(uint64_t seed) { return static_cast<uint32_t>(seed * 0x85ebca6bu); }
float W(uint64_t seed, int m) { return static_cast<float>(1 + SplitMix64(seed + 7919 * (m + 1)) % 3); }
float H(uint64_t seed, int m) { return static_cast<float>(static_cast<int>(SplitMix64(~seed + 104729 * (m + 1)) % 17) - 8); }

bool Reduces(CollectiveOp op) { return op == CollectiveOp::kReduceScatter || op == CollectiveOp::kAllReduce; }

// The two loops over every element, written so the compiler vectorises them
// (this file is built with -O3), with an AVX2 clone picked at load time where
// the CPU has it. Every value is a small integer, exact in fp32 whichever
// instructions compute it.
__attribute__((target_clones("avx2", "default"))) void Fill(float* buf, uint64_t first, uint64_t last,
                                                             uint32_t seed_mix, float w, float h) {
  for (uint64_t j = first; j < last; ++j) buf[j] = G(seed_mix, j) * w + h;
}

__attribute__((target_clones("avx2", "default"))) uint64_t CountDiffering(const float* buf, uint64_t first,
                                                                           uint64_t last, uint32_t seed_mix,
                                                                           float w, float h) {
  uint64_t bad = 0;
  // 32-bit counts per block vectorise; blocks keep them from overflowing.
  for (uint64_t block = first; block < last; block += uint64_t{1} << 30) {
    const uint64_t end = std::min(last, block + (uint64_t{1} << 30));
    uint32_t n = 0;
    for (uint64_t j = block; j < end; ++j) n += buf[j] != G(seed_mix, j) * w + h;
    bad += n;
  }
  return bad;
}

}  // namespace

void FillCollectiveInput(const CollectivePlan& plan, int chip, float* buf) {
  const uint64_t seed = plan.spec().seed;
  const int m = plan.GroupRank(chip);
  for (const Range& r : plan.InputRanges(chip)) Fill(buf, r.offset, r.end(), SeedMix(seed), W(seed, m), H(seed, m));
}

uint64_t CountCollectiveMismatches(const CollectivePlan& plan, int chip, const float* buf) {
  const uint64_t seed = plan.spec().seed;
  const int n = plan.group_size();
  uint64_t bad = 0;
  if (Reduces(plan.spec().op)) {
    float wsum = 0, hsum = 0;
    for (int m = 0; m < n; ++m) {
      wsum += W(seed, m);
      hsum += H(seed, m);
    }
    for (const Range& r : plan.ResultRanges(chip)) bad += CountDiffering(buf, r.offset, r.end(), SeedMix(seed), wsum, hsum);
    return bad;
  }
  // AllGather and AllToAll: element j comes unchanged from the chip whose
  // input covered it, rank j / (V / N).
  const uint64_t shard = plan.virtual_len() / n;
  for (const Range& r : plan.ResultRanges(chip)) {
    for (uint64_t j = r.offset; j < r.end();) {
      const int m = static_cast<int>(j / shard);
      const uint64_t end = std::min<uint64_t>(r.end(), (m + 1) * shard);
      bad += CountDiffering(buf, j, end, SeedMix(seed), W(seed, m), H(seed, m));
      j = end;
    }
  }
  return bad;
}

}  // namespace tpuemu
