#include "core/collective/ring_schedule.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/base/field.h"

namespace tpuemu {
namespace {

int Wrap(int v, int n) { return ((v % n) + n) % n; }

void AddPath(int n, int step0, int from, int dir, int hops, Hop proto, std::vector<Hop>* out) {
  for (int k = 1; k <= hops; ++k) {
    Hop h = proto;
    h.step = step0 + k - 1;
    h.from = Wrap(from + dir * (k - 1), n);
    h.to = Wrap(from + dir * k, n);
    h.dir = dir;
    out->push_back(h);
  }
}

}  // namespace

absl::StatusOr<RingAlgorithm> ResolveAlgorithm(RingAlgorithm requested, bool wraps, const std::string& axis_name,
                                               const std::string& topology) {
  if (requested == RingAlgorithm::kAuto) return wraps ? RingAlgorithm::kBiRing : RingAlgorithm::kLine;
  if (!wraps && requested != RingAlgorithm::kLine) {
    return absl::InvalidArgumentError(absl::StrCat(
        Field("algorithm"), " ", AlgorithmName(requested), ": axis ", axis_name, " of ", topology,
        " has no wraparound link, so rings are impossible; use ", Field("algorithm"),
        " auto or line (or a topology whose ",
        axis_name, " axis wraps)"));
  }
  return requested;
}

int GatherHops(int n, RingAlgorithm alg, int origin, int dir, int way) {
  switch (alg) {
    case RingAlgorithm::kUniRing: return dir == way ? n - 1 : 0;
    case RingAlgorithm::kBiRing:
      // (n-1)/2 hops each way; even n adds one hop each way to the opposite
      // chip, which gets half of the shard from each side (AntipodalHalf).
      return n / 2;
    case RingAlgorithm::kLine: return dir > 0 ? n - 1 - origin : origin;
    case RingAlgorithm::kAuto: break;
  }
  return 0;
}

std::vector<Hop> AllGatherHops(int n, RingAlgorithm alg, int way) {
  std::vector<Hop> hops;
  const bool split = alg == RingAlgorithm::kBiRing && n % 2 == 0;
  for (int o = 0; o < n; ++o) {
    for (int dir : {+1, -1}) {
      Hop proto;
      proto.block = o;
      AddPath(n, 1, o, dir, GatherHops(n, alg, o, dir, way), proto, &hops);
      // The last hop reaches the opposite chip: it carries the shard's first
      // half clockwise and its second half the other way, so each direction
      // carries (n-1)/2 shards instead of n/2 one way and n/2 - 1 the other.
      if (split) hops.back().half = dir > 0 ? 1 : 2;
    }
  }
  return hops;
}

std::vector<Hop> ReduceScatterHops(int n, RingAlgorithm alg, int way) {
  std::vector<Hop> hops = AllGatherHops(n, alg, -way);
  const int last = NumSteps(hops);
  for (Hop& h : hops) {
    h.step = last + 1 - h.step;
    std::swap(h.from, h.to);
    h.dir = -h.dir;
  }
  return hops;
}

std::vector<Hop> AllToAllHops(int n, RingAlgorithm alg, int way) {
  std::vector<Hop> hops;
  for (int u = 0; u < n; ++u) {
    for (int v = 0; v < n; ++v) {
      if (u == v) continue;
      Hop proto;
      proto.block = u;
      proto.dest = v;
      const int ahead = Wrap(v - u, n);
      switch (alg) {
        case RingAlgorithm::kUniRing:
          AddPath(n, 1, u, way, Wrap(way * (v - u), n), proto, &hops);
          break;
        case RingAlgorithm::kBiRing:
          if (2 * ahead < n) {
            AddPath(n, 1, u, +1, ahead, proto, &hops);
          } else if (2 * ahead > n) {
            AddPath(n, 1, u, -1, n - ahead, proto, &hops);
          } else {  // the opposite chip: half each way keeps both directions at V/8
            proto.half = 1;
            AddPath(n, 1, u, +1, ahead, proto, &hops);
            proto.half = 2;
            AddPath(n, 1, u, -1, ahead, proto, &hops);
          }
          break;
        case RingAlgorithm::kLine:
        case RingAlgorithm::kAuto:
          AddPath(n, 1, u, v > u ? +1 : -1, std::abs(v - u), proto, &hops);
          break;
      }
    }
  }
  return hops;
}

int NumSteps(const std::vector<Hop>& hops) {
  int last = 0;
  for (const Hop& h : hops) last = std::max(last, h.step);
  return last;
}

}  // namespace tpuemu
