#include "core/train/kind.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "core/pod/dcn_fabric.h"
#include "core/pod/placement.h"
#include "core/train/checkpoint.h"
#include "core/train/host.h"
#include "core/train/job.h"
#include "core/train/mesh_plan.h"
#include "core/train/pod_part.h"
#include "core/train/report.h"

namespace tpuemu {
namespace {

class PlannedTraining : public PlannedJob {
 public:
  PlannedTraining(TrainJob job, const Topology& topo, PodPart part)
      : job_(std::move(job)), topo_(topo), part_(part) {}

  int steps() const override { return job_.config.steps; }
  int first_step() const override { return job_.resume_step; }
  bool CheckpointAfter(int step) const override { return CheckpointDue(job_.config, step); }
  std::string CheckpointLayout() const override { return absl::StrCat("mesh ", job_.mesh.Describe()); }
  int max_restarts() const override { return job_.config.max_restarts; }
  PodPart part() const override { return part_; }

  absl::StatusOr<std::unique_ptr<HostJob>> MakeHostJob(HostNetwork& net, const RunOptions& options) const override {
    if (job_.config.checkpoint_every > 0 && options.checkpoint_dir.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          job_.config.name, ": checkpoint_every ", job_.config.checkpoint_every,
          ", but this worker has no checkpoint directory; start it with --checkpoint-dir"));
    }
    return std::make_unique<HostTrainer>(job_.config, job_.mesh, net, options.job, options.abort,
                                         TrainCheckpoints{options.checkpoint_dir, job_.resume_step},
                                         options.worker_fault_action);
  }

  JobReport Preview() const override { return PreviewTraining(job_.config, job_.mesh, topo_); }

  JobReport SummarizeStep(const std::vector<ChipRunResult>& chips) const override {
    return tpuemu::SummarizeStep(ConfigNow(), job_.mesh, topo_, chips);
  }

  absl::StatusOr<Faults> AddFaults(Faults faults, int from_step) const override {
    if (!faults.workers.empty()) {
      return absl::InvalidArgumentError("kill_worker and pause_worker go in the job file (they fire on its first "
                                        "attempt), not into a running job");
    }
    if (auto s = CheckFaults(faults, topo_, "faults"); !s.ok()) return s;
    auto later = [&](StepWindow& w) -> absl::Status {
      w.from_step = std::max(w.from_step, from_step);
      if (w.until_step >= 0 && w.until_step <= w.from_step) {
        return absl::InvalidArgumentError(absl::StrCat(
            "faults: until step ", w.until_step, " is not after step ", w.from_step,
            ", the first it would apply to (the later of its from, --from-step and the step the job sends out next)"));
      }
      return absl::OkStatus();
    };
    for (SlowLink& s : faults.slow_links) {
      if (auto bad = later(s.when); !bad.ok()) return bad;
    }
    for (Straggler& s : faults.stragglers) {
      if (auto bad = later(s.when); !bad.ok()) return bad;
    }
    for (DownLink& d : faults.down_links) {
      if (auto bad = later(d.when); !bad.ok()) return bad;
    }
    if (auto s = CheckFaultsBegin(faults, job_.config.steps, "faults"); !s.ok()) return s;
    std::lock_guard<std::mutex> lock(added_mu_);
    // With the job's own and those added before: together they are held to one fault's limits.
    if (auto s = CheckFaultValues(job_.config.faults.With(added_).With(faults), "faults"); !s.ok()) return s;
    // A down link the job's collectives cannot go round is refused now, not
    // at its step with the job failing there.
    TrainConfig with_them = job_.config;
    with_them.faults = job_.config.faults.With(added_).With(faults);
    if (auto s = CheckMeshCollectives(with_them, job_.mesh, topo_); !s.ok()) return s;
    added_ = added_.With(faults);
    return faults;
  }

  std::vector<WorkerFault> WorkerFaults() const override { return job_.config.faults.workers; }

  Faults AddedFaults() const override {
    std::lock_guard<std::mutex> lock(added_mu_);
    return added_;
  }

  void ShareDcn(int step, const std::optional<SlowLink>& share) const override {
    std::lock_guard<std::mutex> lock(added_mu_);
    AddDcnShare(added_, step, share);
  }

  JobReport Summarize(const std::vector<ChipRunResult>& last_step,
                      const std::vector<ChipCheck>& checks) const override {
    TrainReport report = PreviewTraining(job_.config, job_.mesh, topo_);
    double squares = 0;
    for (const ChipCheck& c : checks) squares += c.param_squares;
    report.param_l2 = std::sqrt(squares);
    report.per_layer =
        PerLayerCosts(job_.config, job_.mesh, topo_, tpuemu::SummarizeStep(ConfigNow(), job_.mesh, topo_, last_step));
    return report;
  }

 private:
  // The job's config with the faults added so far: what its steps report.
  TrainConfig ConfigNow() const {
    TrainConfig config = job_.config;
    config.faults = config.faults.With(AddedFaults());
    return config;
  }

  const TrainJob job_;
  const Topology topo_;  // the job's own: the pod's, or the part of it the job runs on
  const PodPart part_;
  mutable std::mutex added_mu_;
  mutable Faults added_;  // by `tpuemu fault` and the shared DCN fabric, while it runs
};

class TrainKind : public JobKind {
 public:
  std::string name() const override { return TrainSpec::kKind; }
  bool traced() const override { return true; }

  absl::StatusOr<std::unique_ptr<PlannedJob>> Plan(const JobSpec& spec, const Topology& topo,
                                                   double time_scale) const override {
    const TrainSpec& train = *spec.get<TrainSpec>();
    // A job on part of the pod (fewer slices, a block of each) is planned
    // on that part alone.
    auto part = TrainPodPart(train.config, topo);
    if (!part.ok()) return part.status();
    auto placed = *part == PodPart{} ? absl::StatusOr<Topology>(topo) : PlacedTopology(topo, *part);
    if (!placed.ok()) return placed.status();
    auto job = PlanTrainJob(train, *placed, time_scale);
    if (!job.ok()) return job.status();
    return std::make_unique<PlannedTraining>(*std::move(job), *placed, *part);
  }

  absl::StatusOr<JobSpec> Resumed(const JobSpec& spec, int done) const override {
    TrainSpec resumed = *spec.get<TrainSpec>();
    resumed.resume_step = done;
    // kill_worker and pause_worker fire on a first attempt only: kept, a
    // resume on a pod of another shape was refused for a host they name that
    // this pod lacks, rather than for its checkpoint.
    resumed.config.faults.workers.clear();
    return JobSpec(std::move(resumed));
  }
};

}  // namespace

std::unique_ptr<JobKind> MakeTrainKind() { return std::make_unique<TrainKind>(); }

}  // namespace tpuemu
