#include "core/collective/oracle.h"

#include <algorithm>

namespace tpuemu {

int OracleHops(CollectiveOp op, RingAlgorithm alg, int n) {
  const int one = alg == RingAlgorithm::kBiRing ? n / 2 : n - 1;
  return op == CollectiveOp::kAllReduce ? 2 * one : one;
}

double OracleSeconds(CollectiveOp op, RingAlgorithm alg, int n, double v, LinkParams link) {
  const double w = link.bw_dir, t = link.latency;
  switch (op) {
    case CollectiveOp::kAllReduce:
      return 2 * OracleSeconds(CollectiveOp::kReduceScatter, alg, n, v, link);
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
      // Each of h store-and-forward hops moves one shard V/n per direction.
      // Even bi-ring: (n/2) T + V / (2W).
      return OracleHops(op, alg, n) * (t + v / (n * w));
    case CollectiveOp::kAllToAll: {
      const double block = v / (static_cast<double>(n) * n);
      if (alg == RingAlgorithm::kUniRing) return (n - 1) * t + v * (n - 1) / (2.0 * n * w);
      if (alg == RingAlgorithm::kBiRing) {
        // Blocks go the short way; at distance n/2 (even n) half goes each way.
        const int h = n / 2;
        double blocks = 0;
        for (int d = 1; d <= (n - 1) / 2; ++d) blocks += d;
        if (n % 2 == 0) blocks += h / 2.0;
        return h * t + blocks * block / w;
      }
      // Line: the busiest link (the middle one) carries (i+1)(n-1-i) blocks.
      double most = 0;
      for (int i = 0; i + 1 < n; ++i) most = std::max(most, static_cast<double>((i + 1) * (n - 1 - i)));
      return (n - 1) * t + most * block / w;
    }
  }
  return 0;
}

double PredictSeconds(const CollectivePlan& plan, const Topology& topo) {
  const CollectiveSpec& spec = plan.spec();
  const double v = static_cast<double>(spec.bytes);
  const int n = plan.group_size();
  const int k = plan.num_parts();
  const bool a2a = spec.op == CollectiveOp::kAllToAll;
  std::vector<AxisPlan> ici;
  const AxisPlan* dcn = nullptr;
  for (const AxisPlan& ap : plan.axes()) {
    if (ap.axis == Axis::kDcn) dcn = &ap; else ici.push_back(ap);
  }
  // DCN is first in every part's gather order, so all parts cross it at the
  // same time with the chip's whole 1/N_ici shard (DESIGN §4's hierarchical
  // form: ICI reduce-scatter, DCN all-reduce of the shard, ICI all-gather).
  double dcn_time = 0;
  double per_part_start = v / k / n;  // one part's bytes per chip before any gather
  if (dcn) {
    dcn_time = OracleSeconds(spec.op, dcn->algorithm, dcn->size, v / n * dcn->size, topo.Link(Axis::kDcn));
    if (!a2a) per_part_start *= dcn->size;
  }
  double worst = 0;
  for (int p = 0; p < k && !ici.empty(); ++p) {
    double total = 0;
    double gathered = per_part_start;
    for (size_t i = 0; i < ici.size(); ++i) {
      const AxisPlan& ap = ici[(i + p) % ici.size()];
      const LinkParams link = topo.Link(ap.axis);
      if (a2a) {
        total += OracleSeconds(spec.op, ap.algorithm, ap.size, (v / k / n) * ap.size, link);
        continue;
      }
      gathered *= ap.size;  // the array this phase gathers (or reduce-scatters)
      total += OracleSeconds(spec.op, ap.algorithm, ap.size, gathered, link);
    }
    worst = std::max(worst, total);
  }
  return dcn_time + worst;
}

}  // namespace tpuemu
