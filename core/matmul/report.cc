#include "core/matmul/report.h"

#include <algorithm>
#include <cmath>

#include "core/matmul/spec.h"

namespace tpuemu {

MatmulReport SummarizeMatmul(const MatmulPlan& plan, const std::vector<ChipRunResult>& chips,
                             const std::vector<ChipCheck>& checks, int num_chips) {
  MatmulReport r;
  r.expr = plan.problem.text;
  r.mesh = plan.problem.mesh.Describe();
  r.dtype_bytes = plan.options.dtype_bytes;
  r.candidates = plan.candidates;
  r.why = plan.why;
  r.predicted_s = plan.chosen().predicted_s();
  for (const ChipRunResult& c : chips) {
    if (c.emulated_s >= r.emulated_s) {
      r.emulated_s = c.emulated_s;
      r.compute_s = c.compute_s;
    }
    r.wall_s = std::max(r.wall_s, c.wall_s);
    r.host_lag_s = std::max(r.host_lag_s, c.host_lag_s);
    r.flops_per_chip = std::max(r.flops_per_chip, c.flops);
    std::map<std::string, uint64_t> mine;
    uint64_t total = 0;
    for (const LinkUse& l : c.links) {
      mine[AxisName(l.axis)] += l.emu_bytes;
      total += l.emu_bytes;
    }
    for (const auto& [axis, b] : mine) r.comm_bytes[axis] = std::max(r.comm_bytes[axis], b);
    r.comm_bytes_total = std::max(r.comm_bytes_total, total);
    r.links.insert(r.links.end(), c.links.begin(), c.links.end());
  }
  r.comm_s = r.emulated_s - r.compute_s;
  r.ratio = r.predicted_s > 0 ? r.emulated_s / r.predicted_s : 0;
  std::sort(r.links.begin(), r.links.end(), [](const LinkUse& a, const LinkUse& b) {
    return std::tie(a.src, a.axis, a.dir) < std::tie(b.src, b.axis, b.dir);
  });
  double err = 0, ref = 0;
  for (const ChipCheck& c : checks) {
    err = std::isnan(c.max_abs_err) ? INFINITY : std::max(err, c.max_abs_err);
    ref = std::max(ref, c.max_abs_ref);
  }
  r.max_rel_err = ref > 0 ? err / ref : err;
  r.correct = static_cast<int>(chips.size()) == num_chips && static_cast<int>(checks.size()) == num_chips &&
              r.max_rel_err <= kMatmulTolerance;
  return r;
}

}  // namespace tpuemu
