#include "core/oracle.h"

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
  std::vector<AxisPlan> ici;
  const AxisPlan* dcn = nullptr;
  for (const AxisPlan& ap : plan.axes()) {
    if (ap.axis == Axis::kDcn) dcn = &ap; else ici.push_back(ap);
  }
  double worst = 0;
  for (int p = 0; p < k; ++p) {
    std::vector<AxisPlan> order;
    if (dcn) order.push_back(*dcn);
    for (size_t i = 0; i < ici.size(); ++i) order.push_back(ici[(i + p) % ici.size()]);
    double total = 0;
    double gathered = v / k / n;  // this part's bytes per chip before any gather
    for (const AxisPlan& ap : order) {
      const LinkParams link = topo.Link(ap.axis);
      if (spec.op == CollectiveOp::kAllToAll) {
        total += OracleSeconds(spec.op, ap.algorithm, ap.size, (v / k / n) * ap.size, link);
        continue;
      }
      gathered *= ap.size;  // the array this phase gathers (or reduce-scatters)
      total += OracleSeconds(spec.op, ap.algorithm, ap.size, gathered, link);
    }
    worst = std::max(worst, total);
  }
  return worst;
}

}  // namespace tpuemu
