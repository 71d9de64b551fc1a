#include "core/matmul/plan.h"

#include <algorithm>
#include <functional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/collective/plan.h"
#include "core/pod/link_clock.h"
#include "core/collective/oracle.h"
#include "core/base/units.h"

namespace tpuemu {
namespace {

std::string Sub(const std::string& axes) { return axes.size() == 1 ? axes : absl::StrCat("{", axes, "}"); }

int64_t LocalElements(const TensorSpec& t, const Mesh& mesh) {
  int64_t n = 1;
  for (size_t d = 0; d < t.dims.size(); ++d) n *= t.sizes[d] / mesh.Size(t.axes[d]);
  return n;
}

// Builds one candidate: the steps that take the operands from their given
// sharding to `local` (the sharding of every dimension during the multiply)
// and the product from there to the requested output.
class CandidateBuilder {
 public:
  CandidateBuilder(const MatmulProblem& p, const Topology& topo, const MatmulOptions& options)
      : p_(p), topo_(topo), options_(options), t_{p.a, p.b, p.out} {}

  absl::StatusOr<MatmulCandidate> Build(const std::map<std::string, std::string>& local) {
    for (int ti : {0, 1}) {
      for (size_t d = 0; d < t_[ti].dims.size(); ++d) {
        if (auto s = Transition(ti, static_cast<int>(d), local.at(t_[ti].dims[d])); !s.ok()) return s;
      }
    }
    Multiply(local);
    if (auto s = Reduce(); !s.ok()) return s;
    for (size_t d = 0; d < t_[2].dims.size(); ++d) {
      if (auto s = Transition(2, static_cast<int>(d), p_.out.axes[d]); !s.ok()) return s;
    }
    t_[2].unreduced = p_.out.unreduced;
    std::vector<std::string> labels;
    for (const MatmulStep& s : c_.steps) {
      if (s.kind == MatmulStepKind::kMultiply) {
        c_.compute_s += s.predicted_s;
        c_.flops_per_chip = s.flops;
        labels.push_back("multiply");
        continue;
      }
      c_.comm_s += s.predicted_s;
      for (const auto& [_, b] : s.bytes_per_chip) c_.comm_bytes_per_chip += b;
      labels.push_back(s.kind == MatmulStepKind::kReduceScatter || s.kind == MatmulStepKind::kAllReduce
                           ? absl::StrCat(StepKindName(s.kind), "_", s.axes)
                           : absl::StrCat(StepKindName(s.kind), "_", s.axes, " ", t_[s.tensor].name));
    }
    c_.summary = absl::StrJoin(labels, ", ");
    return c_;
  }

 private:
  // From the tensor's sharding S of dimension d to `target`: keep their common
  // prefix, AllGather the rest of S (a suffix, so every chip still holds one
  // contiguous block), then slice locally down to the rest of `target`.
  absl::Status Transition(int ti, int d, const std::string& target) {
    const std::string& s = t_[ti].axes[d];
    size_t common = 0;
    while (common < s.size() && common < target.size() && s[common] == target[common]) ++common;
    if (s.size() > common) {
      if (auto st = Gather(ti, d, s.substr(common)); !st.ok()) return st;
    }
    if (target.size() > common) Slice(ti, d, target.substr(common));
    return absl::OkStatus();
  }

  absl::Status Gather(int ti, int d, const std::string& axes) {
    TensorSpec& t = t_[ti];
    const std::string before = t.Notation();
    t.axes[d].resize(t.axes[d].size() - axes.size());
    return Collective(CollectiveOp::kAllGather, ti, d, axes, LocalElements(t, p_.mesh),
                      absl::StrCat("AllGather_", axes, " ", before, " -> ", t.Notation()));
  }

  void Slice(int ti, int d, const std::string& axes) {
    TensorSpec& t = t_[ti];
    MatmulStep step;
    step.kind = MatmulStepKind::kSlice;
    step.tensor = ti;
    step.dim = d;
    step.axes = axes;
    const std::string before = t.Notation();
    t.axes[d] += axes;
    step.notation = absl::StrCat("DynamicSlice_", axes, " ", before, " -> ", t.Notation());
    c_.steps.push_back(step);
    TrackPeak();
  }

  void Multiply(const std::map<std::string, std::string>& local) {
    TensorSpec& out = t_[2];
    out.unreduced.clear();
    for (const std::string& j : p_.contract) out.unreduced += local.at(j);
    for (size_t d = 0; d < out.dims.size(); ++d) out.axes[d] = local.at(out.dims[d]);
    int64_t k = 1;
    for (const std::string& j : p_.contract) k *= t_[0].sizes[t_[0].Find(j)] / p_.mesh.Size(local.at(j));
    const int64_t mn = LocalElements(out, p_.mesh);
    MatmulStep step;
    step.kind = MatmulStepKind::kMultiply;
    step.tensor = 2;
    step.flops = static_cast<uint64_t>(2 * mn * k);
    const double hbm = static_cast<double>(LocalElements(t_[0], p_.mesh) + LocalElements(t_[1], p_.mesh) + mn) *
                       options_.dtype_bytes;
    step.predicted_s = RooflineSeconds(topo_.profile(), static_cast<double>(step.flops), hbm);
    step.notation = absl::StrCat(t_[0].Notation(), " * ", t_[1].Notation(), " -> ", out.Notation());
    c_.steps.push_back(step);
    TrackPeak();
  }

  // Partial sums over axes the output does not keep unreduced: ReduceScatter
  // onto an output dimension whose requested sharding continues with them,
  // AllReduce over the rest.
  absl::Status Reduce() {
    TensorSpec& out = t_[2];
    for (char u : p_.out.unreduced) {
      if (out.unreduced.find(u) == std::string::npos) {
        return absl::FailedPreconditionError(absl::StrCat("no contracted dimension is sharded on ", std::string(1, u)));
      }
    }
    std::string pending;
    for (char u : out.unreduced) {
      if (p_.out.unreduced.find(u) == std::string::npos) pending += u;
    }
    for (size_t d = 0; d < out.dims.size() && !pending.empty(); ++d) {
      const std::string& want = p_.out.axes[d];
      if (want.compare(0, out.axes[d].size(), out.axes[d]) != 0) continue;
      std::string run;
      for (size_t i = out.axes[d].size(); i < want.size() && pending.find(want[i]) != std::string::npos; ++i) {
        run += want[i];
      }
      if (run.empty()) continue;
      const std::string before = out.Notation();
      const int64_t elements = LocalElements(out, p_.mesh);
      for (char u : run) {
        pending.erase(pending.find(u), 1);
        out.unreduced.erase(out.unreduced.find(u), 1);
      }
      out.axes[d] += run;
      if (auto s = Collective(CollectiveOp::kReduceScatter, 2, static_cast<int>(d), run, elements,
                              absl::StrCat("ReduceScatter_{", run, ",", out.dims[d], "} ", before, " -> ",
                                           out.Notation()));
          !s.ok()) {
        return s;
      }
    }
    if (pending.empty()) return absl::OkStatus();
    const std::string before = out.Notation();
    for (char u : pending) out.unreduced.erase(out.unreduced.find(u), 1);
    return Collective(CollectiveOp::kAllReduce, 2, -1, pending, LocalElements(out, p_.mesh),
                      absl::StrCat("AllReduce_", Sub(pending), " ", before, " -> ", out.Notation()));
  }

  // A collective over `axes` whose array (V) holds `elements` per chip after
  // a gather, before a reduction.
  absl::Status Collective(CollectiveOp op, int ti, int d, const std::string& axes, int64_t elements,
                          std::string notation) {
    const int n = p_.mesh.Size(axes);
    MatmulStep step;
    step.kind = op == CollectiveOp::kAllGather       ? MatmulStepKind::kAllGather
                : op == CollectiveOp::kReduceScatter ? MatmulStepKind::kReduceScatter
                                                     : MatmulStepKind::kAllReduce;
    step.tensor = ti;
    step.dim = d;
    step.axes = axes;
    step.notation = std::move(notation);
    CollectiveSpec spec;
    spec.op = op;
    spec.axes = p_.mesh.Physical(axes);
    spec.dtype_bytes = options_.dtype_bytes;
    spec.chunk_bytes = options_.chunk_bytes;
    spec.bytes = static_cast<uint64_t>(elements) * options_.dtype_bytes;
    step.bytes = spec.bytes;
    auto plan = CollectivePlan::Create(topo_, spec);
    if (!plan.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          StepKindName(step.kind), "_", axes, " of ", t_[ti].Notation(), " (", elements,
          " elements per chip) cannot split evenly over its ", n, " chips",
          spec.axes.size() > 1 ? " and per-axis parts" : "", "; use larger dimension sizes"));
    }
    step.plan = std::make_shared<const CollectivePlan>(*std::move(plan));
    step.predicted_s = PredictSeconds(*step.plan, topo_);
    std::map<int, std::map<std::string, uint64_t>> sent;  // chip -> axis -> bytes
    for (const PlannedTransfer& tr : step.plan->transfers()) {
      sent[tr.src][AxisName(tr.axis)] += tr.elements() * options_.dtype_bytes;
    }
    for (const auto& [_, by_axis] : sent) {
      for (const auto& [axis, b] : by_axis) step.bytes_per_chip[axis] = std::max(step.bytes_per_chip[axis], b);
    }
    c_.steps.push_back(std::move(step));
    TrackPeak();
    return absl::OkStatus();
  }

  void TrackPeak() {
    const bool multiplied = std::any_of(c_.steps.begin(), c_.steps.end(),
                                        [](const MatmulStep& s) { return s.kind == MatmulStepKind::kMultiply; });
    const uint64_t now = LocalElements(t_[0], p_.mesh) + LocalElements(t_[1], p_.mesh) +
                         (multiplied ? LocalElements(t_[2], p_.mesh) : 0);
    c_.peak_local_elements = std::max(c_.peak_local_elements, now);
  }

  const MatmulProblem& p_;
  const Topology& topo_;
  const MatmulOptions options_;
  TensorSpec t_[3];
  MatmulCandidate c_;
};

std::string Describe(const MatmulCandidate& c) {
  return absl::StrCat("'", c.summary, "': ", FormatSeconds(c.predicted_s()), " (compute ", FormatSeconds(c.compute_s),
                      " + communication ", FormatSeconds(c.comm_s), ")");
}

}  // namespace

std::string StepKindName(MatmulStepKind kind) {
  switch (kind) {
    case MatmulStepKind::kAllGather: return "AllGather";
    case MatmulStepKind::kSlice: return "DynamicSlice";
    case MatmulStepKind::kMultiply: return "Multiply";
    case MatmulStepKind::kAllReduce: return "AllReduce";
    case MatmulStepKind::kReduceScatter: return "ReduceScatter";
  }
  return "?";
}

absl::StatusOr<MatmulPlan> PlanMatmul(const MatmulProblem& p, const Topology& topo, const MatmulOptions& options) {
  // The shardings each dimension may have during the local multiply.
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> choices;
  auto add = [&](const std::string& dim, std::vector<std::string> options_for_dim) {
    if (std::find(names.begin(), names.end(), dim) != names.end()) return;
    names.push_back(dim);
    std::vector<std::string> unique;
    for (std::string& o : options_for_dim) {
      if (std::find(unique.begin(), unique.end(), o) == unique.end()) unique.push_back(std::move(o));
    }
    choices.push_back(std::move(unique));
  };
  for (const TensorSpec* t : {&p.a, &p.b}) {
    const TensorSpec& other = t == &p.a ? p.b : p.a;
    for (size_t d = 0; d < t->dims.size(); ++d) {
      const int od = other.Find(t->dims[d]);
      if (od >= 0) {
        add(t->dims[d], {t->axes[d], other.axes[od], ""});
      } else {
        add(t->dims[d], {t->axes[d], p.out.axes[p.out.Find(t->dims[d])], ""});
      }
    }
  }

  MatmulPlan plan;
  plan.problem = p;
  plan.options = options;
  std::string last_reason = "no sharding of the operands allows a local multiply";
  std::set<std::string> seen;
  std::map<std::string, std::string> local;
  std::function<void(size_t)> visit = [&](size_t i) {
    if (i < names.size()) {
      for (const std::string& c : choices[i]) {
        local[names[i]] = c;
        visit(i + 1);
      }
      return;
    }
    std::string used;  // every mesh axis at most once across the multiply
    for (const auto& [_, axes] : local) used += axes;
    std::string sorted = used;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return;
    auto c = CandidateBuilder(p, topo, options).Build(local);
    if (!c.ok()) {
      last_reason = std::string(c.status().message());
      return;
    }
    if (seen.insert(c->summary).second) plan.candidates.push_back(*std::move(c));
  };
  visit(0);
  if (plan.candidates.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot plan '", p.text, "' on mesh ", p.mesh.Describe(), ": ",
                                                   last_reason));
  }
  std::stable_sort(plan.candidates.begin(), plan.candidates.end(), [](const MatmulCandidate& a, const MatmulCandidate& b) {
    return std::make_tuple(a.predicted_s(), a.comm_bytes_per_chip, a.steps.size(), a.flops_per_chip) <
           std::make_tuple(b.predicted_s(), b.comm_bytes_per_chip, b.steps.size(), b.flops_per_chip);
  });
  plan.why = plan.candidates.size() == 1
                 ? absl::StrCat("the only valid plan: ", Describe(plan.chosen()))
                 : absl::StrCat("chose ", Describe(plan.chosen()), " over the runner-up ",
                                Describe(plan.candidates[1]), "; ", plan.candidates.size(), " valid plans in all");
  return plan;
}

}  // namespace tpuemu
