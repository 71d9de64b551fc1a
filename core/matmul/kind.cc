#include "core/matmul/kind.h"

#include "core/matmul/chip.h"
#include "core/matmul/host.h"
#include "core/matmul/report.h"

namespace tpuemu {
namespace {

class PlannedMatmul : public PlannedJob {
 public:
  PlannedMatmul(std::shared_ptr<const MatmulProgram> program, int num_chips)
      : program_(std::move(program)), num_chips_(num_chips) {}

  absl::StatusOr<std::unique_ptr<HostJob>> MakeHostJob(HostNetwork& net, const RunOptions& options) const override {
    return std::make_unique<HostMatmul>(program_, net, options);
  }

  JobReport Summarize(const std::vector<ChipRunResult>& last_step,
                      const std::vector<ChipCheck>& checks) const override {
    return SummarizeMatmul(program_->plan, last_step, checks, num_chips_);
  }

 private:
  const std::shared_ptr<const MatmulProgram> program_;
  const int num_chips_;
};

class MatmulKind : public JobKind {
 public:
  std::string name() const override { return MatmulSpec::kKind; }

  absl::StatusOr<std::unique_ptr<PlannedJob>> Plan(const JobSpec& spec, const Topology& topo,
                                                   double) const override {
    auto program = MatmulProgram::Create(*spec.get<MatmulSpec>(), topo);
    if (!program.ok()) return program.status();
    return std::make_unique<PlannedMatmul>(*std::move(program), topo.num_chips());
  }
};

}  // namespace

std::unique_ptr<JobKind> MakeMatmulKind() { return std::make_unique<MatmulKind>(); }

}  // namespace tpuemu
