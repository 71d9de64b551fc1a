#include "core/collective_data.h"

#include <algorithm>

#include "core/splitmix.h"

namespace tpuemu {
namespace {

// Cheap per-element hash (multiply-xorshift): this runs over every element
// of every chip's input and result.
float G(uint64_t seed, uint64_t j) {
  uint32_t x = static_cast<uint32_t>(j * 0x9e3779b1u) ^ static_cast<uint32_t>(seed * 0x85ebca6bu);
  x ^= x >> 15;
  x *= 0x2c1b3c6du;
  x ^= x >> 12;
  return static_cast<float>(static_cast<int>(x % 17u) - 8);
}
float W(uint64_t seed, int m) { return static_cast<float>(1 + SplitMix64(seed + 7919 * (m + 1)) % 3); }
float H(uint64_t seed, int m) { return static_cast<float>(static_cast<int>(SplitMix64(~seed + 104729 * (m + 1)) % 17) - 8); }

bool Reduces(CollectiveOp op) { return op == CollectiveOp::kReduceScatter || op == CollectiveOp::kAllReduce; }

}  // namespace

void FillCollectiveInput(const CollectivePlan& plan, int chip, float* buf) {
  const uint64_t seed = plan.spec().seed;
  const int m = plan.GroupRank(chip);
  const float w = W(seed, m), h = H(seed, m);
  for (const Range& r : plan.InputRanges(chip)) {
    for (uint64_t j = r.offset; j < r.end(); ++j) buf[j] = G(seed, j) * w + h;
  }
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
    for (const Range& r : plan.ResultRanges(chip)) {
      for (uint64_t j = r.offset; j < r.end(); ++j) bad += buf[j] != G(seed, j) * wsum + hsum;
    }
    return bad;
  }
  // AllGather and AllToAll: element j comes unchanged from the chip whose
  // input covered it, rank j / (V / N).
  const uint64_t shard = plan.virtual_len() / n;
  for (const Range& r : plan.ResultRanges(chip)) {
    for (uint64_t j = r.offset; j < r.end();) {
      const int m = static_cast<int>(j / shard);
      const float w = W(seed, m), h = H(seed, m);
      const uint64_t end = std::min<uint64_t>(r.end(), (m + 1) * shard);
      for (; j < end; ++j) bad += buf[j] != G(seed, j) * w + h;
    }
  }
  return bad;
}

}  // namespace tpuemu
