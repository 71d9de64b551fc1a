#include "core/collective/report.h"

#include <algorithm>

#include "core/collective/oracle.h"

namespace tpuemu {

double BusFactor(CollectiveOp op, int n) {
  const double f = static_cast<double>(n - 1) / n;
  return op == CollectiveOp::kAllReduce ? 2 * f : f;
}

CollectiveReport Summarize(const CollectivePlan& plan, const Topology& topo, const std::vector<ChipRunResult>& chips) {
  const CollectiveSpec& spec = plan.spec();
  CollectiveReport r;
  r.op = OpName(spec.op);
  r.axes = AxesName(spec.axes);
  r.algorithm = plan.AlgorithmLabel();
  r.n = plan.group_size();
  r.bytes = spec.bytes;
  r.dtype_bytes = spec.dtype_bytes;
  r.correct = !chips.empty();
  for (const ChipRunResult& c : chips) {
    r.emulated_s = std::max(r.emulated_s, c.emulated_s);
    r.wall_s = std::max(r.wall_s, c.wall_s);
    r.host_lag_s = std::max(r.host_lag_s, c.host_lag_s);
    r.mismatches += c.mismatches;
    r.links.insert(r.links.end(), c.links.begin(), c.links.end());
  }
  r.correct = r.correct && r.mismatches == 0 && static_cast<int>(chips.size()) == topo.num_chips();
  std::sort(r.links.begin(), r.links.end(), [](const LinkUse& a, const LinkUse& b) {
    return std::tie(a.src, a.axis, a.dir) < std::tie(b.src, b.axis, b.dir);
  });
  r.predicted_s = PredictSeconds(plan, topo);
  r.ratio = r.predicted_s > 0 ? r.emulated_s / r.predicted_s : 0;
  r.seed_formula_s = SeedFormulaSeconds(plan, topo);
  r.seed_ratio = r.seed_formula_s > 0 ? r.emulated_s / r.seed_formula_s : 0;
  r.faults = spec.faults.ActiveAt(0);
  for (std::string& routed : plan.Routed()) r.faults.push_back(std::move(routed));
  // nccl-tests sizes: the full array for AllGather, ReduceScatter and
  // AllReduce; one rank's buffer (V / n) for AllToAll.
  const double per = spec.op == CollectiveOp::kAllToAll ? r.n : 1;
  const double host_bytes = static_cast<double>(spec.elements()) * sizeof(float) / per;
  const double factor = BusFactor(spec.op, r.n);
  if (r.wall_s > 0) {
    r.algbw_gbps = host_bytes / r.wall_s / 1e9;
    r.busbw_gbps = r.algbw_gbps * factor;
  }
  if (r.emulated_s > 0) {
    r.emulated_algbw_gbps = static_cast<double>(spec.bytes) / per / r.emulated_s / 1e9;
    r.emulated_busbw_gbps = r.emulated_algbw_gbps * factor;
  }
  return r;
}

}  // namespace tpuemu
