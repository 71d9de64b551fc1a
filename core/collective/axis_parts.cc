#include "core/collective/axis_parts.h"

#include <cmath>

namespace tpuemu {
namespace {

// Solves a x = b for a small dense system (Gaussian elimination with partial
// pivoting). Returns false if the system is singular.
bool Solve(std::vector<std::vector<double>> a, std::vector<double> b, std::vector<double>* x) {
  const int n = static_cast<int>(b.size());
  for (int c = 0; c < n; ++c) {
    int pivot = c;
    for (int r = c + 1; r < n; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    }
    if (std::abs(a[pivot][c]) < 1e-300) return false;
    std::swap(a[c], a[pivot]);
    std::swap(b[c], b[pivot]);
    for (int r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (int j = c; j < n; ++j) a[r][j] -= f * a[c][j];
      b[r] -= f * b[c];
    }
  }
  x->resize(n);
  for (int i = 0; i < n; ++i) (*x)[i] = b[i] / a[i][i];
  return true;
}

}  // namespace

double GatherLinkSecondsPerByte(const AxisPlan& axis, LinkParams link) {
  const double n = axis.size;
  // A bidirectional ring puts (n-1)/2 shards of G/n on each direction; a
  // unidirectional ring n-1 on its one direction; a line n-1 on its end links.
  const double shards = axis.algorithm == RingAlgorithm::kBiRing ? (n - 1) / 2 : n - 1;
  return shards / n / link.bw_dir;
}

std::vector<double> PartFractions(const std::vector<AxisPlan>& ici, const Topology& topo) {
  const int k = static_cast<int>(ici.size());
  std::vector<double> equal(std::max(k, 1), 1.0 / std::max(k, 1));
  if (k < 2) return equal;
  // load[a][p]: seconds on axis a's busiest link per byte of the array that
  // part p carries (a whole part is V: the chip's piece times N).
  double chips = 1;
  for (const AxisPlan& ap : ici) chips *= ap.size;
  std::vector<std::vector<double>> load(k, std::vector<double>(k, 0));
  for (int p = 0; p < k; ++p) {
    double gathered = 1 / chips;
    for (int i = 0; i < k; ++i) {
      const int a = (i + p) % k;
      gathered *= ici[a].size;
      load[a][p] += GatherLinkSecondsPerByte(ici[a], topo.Link(ici[a].axis)) * gathered;
    }
  }
  // Every axis equally loaded, fractions summing to one.
  std::vector<std::vector<double>> m(k, std::vector<double>(k, 0));
  std::vector<double> rhs(k, 0), f;
  for (int a = 0; a + 1 < k; ++a) {
    for (int p = 0; p < k; ++p) m[a][p] = load[a][p] - load[a + 1][p];
  }
  for (int p = 0; p < k; ++p) m[k - 1][p] = 1;
  rhs[k - 1] = 1;
  if (!Solve(m, rhs, &f)) return equal;
  for (double x : f) {
    if (x < 0) return equal;
  }
  return f;
}

}  // namespace tpuemu
