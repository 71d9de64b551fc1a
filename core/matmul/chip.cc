#include "core/matmul/chip.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/tensor/gemm.h"
#include "core/pod/link_clock.h"
#include "core/collective/tensor_collective.h"

namespace tpuemu {
namespace {

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// A tensor whose dimensions form two groups (rows, then columns, or the
// reverse) seen as a matrix; BLIS reads either through its strides.
template <typename View, typename Ptr, typename IsRow>
View AsMatrix(Ptr data, const std::vector<std::string>& dims, const std::vector<int64_t>& shape, IsRow is_row) {
  View v;
  v.data = data;
  v.rows = v.cols = 1;
  for (size_t d = 0; d < dims.size(); ++d) (is_row(dims[d]) ? v.rows : v.cols) *= shape[d];
  const bool rows_first = dims.empty() || is_row(dims[0]) || v.rows == 1;
  v.rs = rows_first ? v.cols : 1;
  v.cs = rows_first ? 1 : v.rows;
  return v;
}

void Multiply(const MatmulProblem& p, const LocalTensor& a, const LocalTensor& b, LocalTensor& c,
              const JobAbort& abort) {
  auto contracted = [&](const std::string& d) { return Contains(p.contract, d); };
  auto from_a = [&](const std::string& d) { return p.a.Find(d) >= 0; };
  GemmUnlessAborted(
      AsMatrix<MatrixView>(a.data.get(), p.a.dims, a.shape, [&](const std::string& d) { return !contracted(d); }),
      AsMatrix<MatrixView>(b.data.get(), p.b.dims, b.shape, contracted),
      AsMatrix<MutableMatrixView>(c.data.get(), p.out.dims, c.shape, from_a), abort);
}

// The product's local shape from its operands' local shapes.
std::vector<int64_t> ProductShape(const MatmulProblem& p, const LocalTensor& a, const LocalTensor& b) {
  std::vector<int64_t> shape;
  for (const std::string& d : p.out.dims) shape.push_back(p.a.Find(d) >= 0 ? a.shape[p.a.Find(d)] : b.shape[p.b.Find(d)]);
  return shape;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const MatmulProgram>> MatmulProgram::Create(const MatmulSpec& spec,
                                                                           const Topology& topo) {
  auto plan = PlanMatmulSpec(spec, topo);
  if (!plan.ok()) return plan.status();
  auto program = std::make_shared<MatmulProgram>();
  program->spec = spec;
  program->plan = *std::move(plan);
  return std::shared_ptr<const MatmulProgram>(std::move(program));
}

ChipMatmul::ChipMatmul(std::shared_ptr<const MatmulProgram> program, int chip, HostNetwork& net,
                       const RunOptions& options)
    : program_(std::move(program)), problem_(program_->plan.problem), chip_(chip), net_(net), options_(options) {}

int ChipMatmul::ShardIndex(const std::string& letters) const {
  const Coord coord = net_.topology().CoordOf(chip_);
  int index = 0;
  for (char c : letters) {
    const MeshAxis* m = problem_.mesh.Find(c);
    index = index * m->size + coord.Get(m->axis);
  }
  return index;
}

void ChipMatmul::Prepare() {
  spec_[0] = problem_.a;
  spec_[1] = problem_.b;
  spec_[2] = problem_.out;
  for (int t : {0, 1}) {
    const TensorSpec& s = spec_[t];
    std::vector<std::vector<int64_t>> indices(s.dims.size());
    for (size_t d = 0; d < s.dims.size(); ++d) {
      const int64_t len = s.sizes[d] / problem_.mesh.Size(s.axes[d]);
      const int64_t first = ShardIndex(s.axes[d]) * len;
      for (int64_t i = 0; i < len; ++i) indices[d].push_back(first + i);
    }
    value_[t] = GenerateBlock(program_->spec.values, program_->spec.seed, t, s.sizes, indices);
  }
}

absl::StatusOr<ChipRunResult> ChipMatmul::Run() {
  const auto wall_start = WallClock::now();
  for (size_t i = 0; i < program_->plan.chosen().steps.size(); ++i) {
    if (options_.abort->aborted()) return options_.abort->status();
    if (auto s = Step(i); !s.ok()) return s;
  }
  // A multiply cut short by the abort left the product partial.
  if (options_.abort->aborted()) return options_.abort->status();
  ChipRunResult r;
  r.chip = chip_;
  r.emulated_s = now_;
  r.wall_s = std::chrono::duration<double>(WallClock::now() - wall_start).count();
  const double scale = net_.time_scale();
  if (scale > 0) r.host_lag_s = std::max(0.0, r.wall_s - now_ * scale);
  r.compute_s = compute_s_;
  r.flops = flops_;
  r.links = last_.links;
  return r;
}

absl::Status ChipMatmul::Step(size_t i) {
  const MatmulStep& step = program_->plan.chosen().steps[i];
  const int n = problem_.mesh.Size(step.axes);
  switch (step.kind) {
    case MatmulStepKind::kAllGather: {
      if (auto s = RunCollective(i, value_[step.tensor], step.dim); !s.ok()) return s;
      std::string& axes = spec_[step.tensor].axes[step.dim];
      axes.resize(axes.size() - step.axes.size());
      return absl::OkStatus();
    }
    case MatmulStepKind::kSlice:
      value_[step.tensor] = SliceBlock(value_[step.tensor], step.dim, n, ShardIndex(step.axes));
      spec_[step.tensor].axes[step.dim] += step.axes;
      return absl::OkStatus();
    case MatmulStepKind::kMultiply:
      Multiply();
      return absl::OkStatus();
    case MatmulStepKind::kReduceScatter:
      if (auto s = RunCollective(i, value_[2], step.dim); !s.ok()) return s;
      spec_[2].axes[step.dim] += step.axes;
      break;
    case MatmulStepKind::kAllReduce:
      if (auto s = RunCollective(i, value_[2], 0); !s.ok()) return s;
      break;
  }
  for (char u : step.axes) spec_[2].unreduced.erase(spec_[2].unreduced.find(u), 1);
  return absl::OkStatus();
}

absl::Status ChipMatmul::RunCollective(size_t i, LocalTensor& t, int dim) {
  RunOptions options = options_;
  options.tag_base = static_cast<uint64_t>(i + 1) << 56;
  auto report = RunTensorCollective(*program_->plan.chosen().steps[i].plan, chip_, net_, options, &links_, now_, t,
                                    dim);
  if (!report.ok()) return report.status();
  now_ = report->emulated_s;
  last_ = *std::move(report);
  return absl::OkStatus();
}

void ChipMatmul::Multiply() {
  LocalTensor& c = value_[2];
  c = LocalTensor::Allocate(ProductShape(problem_, value_[0], value_[1]));
  const auto wall_start = WallClock::now();
  tpuemu::Multiply(problem_, value_[0], value_[1], c, *options_.abort);
  int64_t k = 1;
  multiply_contract_axes_.clear();
  spec_[2].unreduced.clear();
  for (const std::string& j : problem_.contract) {
    const int d = problem_.a.Find(j);
    k *= value_[0].shape[d];
    multiply_contract_axes_.push_back(spec_[0].axes[d]);
    spec_[2].unreduced += spec_[0].axes[d];
  }
  for (size_t d = 0; d < spec_[2].dims.size(); ++d) {
    const std::string& name = spec_[2].dims[d];
    spec_[2].axes[d] = problem_.a.Find(name) >= 0 ? spec_[0].axes[problem_.a.Find(name)]
                                                  : spec_[1].axes[problem_.b.Find(name)];
  }
  const double flops = 2.0 * static_cast<double>(c.elements()) * static_cast<double>(k);
  const double hbm = static_cast<double>(value_[0].elements() + value_[1].elements() + c.elements()) *
                     program_->spec.dtype_bytes;
  const double dt = RooflineSeconds(net_.topology().profile(), flops, hbm);
  // Paced: the op takes at least its emulated time, stretched.
  const double scale = net_.time_scale();
  if (scale > 0) {
    options_.abort->SleepUntil(wall_start + WallSeconds(dt * scale));
  }
  now_ += dt;
  compute_s_ += dt;
  flops_ += static_cast<uint64_t>(flops);
}

MatmulCheck ChipMatmul::Check() const {
  const TensorSpec& out = problem_.out;
  // Contracted indices this chip's block sums over: all of them, except
  // along axes the output keeps unreduced, where only this chip's share.
  std::map<std::string, std::vector<int64_t>> contract;
  for (size_t jj = 0; jj < problem_.contract.size(); ++jj) {
    const std::string& j = problem_.contract[jj];
    const std::string& axes = multiply_contract_axes_[jj];
    const int64_t size = problem_.a.sizes[problem_.a.Find(j)];
    const int shards = problem_.mesh.Size(axes);
    const int64_t len = size / shards;
    const Coord coord = net_.topology().CoordOf(chip_);
    for (int s = 0; s < shards; ++s) {
      bool mine = true;
      int rest = s;
      for (int i = static_cast<int>(axes.size()) - 1; i >= 0; --i) {
        const MeshAxis* m = problem_.mesh.Find(axes[i]);
        const int digit = rest % m->size;
        rest /= m->size;
        if (out.unreduced.find(axes[i]) != std::string::npos && digit != coord.Get(m->axis)) mine = false;
      }
      for (int64_t i = 0; mine && i < len; ++i) contract[j].push_back(s * len + i);
    }
  }
  auto indices = [&](const TensorSpec& t) {
    std::vector<std::vector<int64_t>> idx(t.dims.size());
    for (size_t d = 0; d < t.dims.size(); ++d) {
      if (contract.count(t.dims[d])) {
        idx[d] = contract[t.dims[d]];
        continue;
      }
      const int od = out.Find(t.dims[d]);
      const int64_t len = out.sizes[od] / problem_.mesh.Size(out.axes[od]);
      for (int64_t i = 0; i < len; ++i) idx[d].push_back(ShardIndex(out.axes[od]) * len + i);
    }
    return idx;
  };
  const MatmulSpec& spec = program_->spec;
  const LocalTensor a = GenerateBlock(spec.values, spec.seed, 0, problem_.a.sizes, indices(problem_.a));
  const LocalTensor b = GenerateBlock(spec.values, spec.seed, 1, problem_.b.sizes, indices(problem_.b));
  LocalTensor ref = LocalTensor::Allocate(ProductShape(problem_, a, b));
  tpuemu::Multiply(problem_, a, b, ref, *options_.abort);

  MatmulCheck check;
  const LocalTensor& c = value_[2];
  if (c.shape != ref.shape) {
    check.max_abs_err = INFINITY;
    return check;
  }
  for (int64_t i = 0; i < ref.elements(); ++i) {
    const double err = std::fabs(c.data[i] - ref.data[i]);
    check.max_abs_err = std::isnan(err) ? INFINITY : std::max(check.max_abs_err, err);
    check.max_abs_ref = std::max<double>(check.max_abs_ref, std::fabs(ref.data[i]));
  }
  return check;
}

}  // namespace tpuemu
