// A kind of job (collectives, matmuls, training, and those to come) as the
// pods see it: a spec checked and planned once, every host's share of it,
// how many steps it runs, and the summary of what the chips did. The
// coordinator and the in-process pod run every kind through this interface
// only; the kinds are chosen in one place, core/job/kinds.h.
#pragma once

#include <any>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/host/chip_result.h"
#include "core/host/job.h"
#include "core/host/job_spec.h"
#include "core/host/run_options.h"
#include "core/pod/placement.h"
#include "core/pod/topology.h"
#include "core/wire/host_network.h"
#include "core/pod/faults.h"

namespace tpuemu {

// What a kind reports of a job: its own type (CollectiveReport, MatmulReport,
// TrainReport, StepReport...), which the adapters convert for users. Empty
// when a kind has nothing to say at that point.
using JobReport = std::any;

// A job's spec checked and planned against a pod: every error a spec can
// have was found making it.
class PlannedJob {
 public:
  virtual ~PlannedJob() = default;
  // How many times every host runs its share, all hosts at once (training:
  // its steps; the others run once).
  virtual int steps() const { return 1; }
  // The first step to run: a resumed job's earlier steps were done before.
  virtual int first_step() const { return 0; }
  // Whether the hosts keep a checkpoint after `step` (training's
  // checkpoint_every): once every host ran it, the job can resume from there.
  virtual bool CheckpointAfter(int step) const { return false; }
  // What a checkpoint of the job is laid out by (training: its mesh); a
  // checkpoint resumes only under the same layout. Empty: no checkpoints.
  virtual std::string CheckpointLayout() const { return {}; }
  // How many times the job resumes by itself after a lost worker.
  virtual int max_restarts() const { return 0; }
  // The part of the pod the job runs on (all 0: the whole pod). A job on
  // part of it was planned on PlacedTopology(pod, part()): its chips and
  // hosts are named by its own ids.
  virtual PodPart part() const { return {}; }
  // One host's share, to prepare, run steps() times, then check.
  virtual absl::StatusOr<std::unique_ptr<HostJob>> MakeHostJob(HostNetwork& net, const RunOptions& options) const = 0;
  // What the job's record shows before its first step (training: its mesh
  // and memory per chip).
  virtual JobReport Preview() const { return {}; }
  // A finished step's figures, published as soon as the step ends (training).
  virtual JobReport SummarizeStep(const std::vector<ChipRunResult>& chips) const { return {}; }
  // The job's result, from every chip's results of the last step and every
  // chip's checks.
  virtual JobReport Summarize(const std::vector<ChipRunResult>& last_step,
                              const std::vector<ChipCheck>& checks) const = 0;
  // `tpuemu fault` (training only): `faults`, each moved to start no sooner
  // than `from_step`, join the job from then on; its step reports list them.
  // Errors name what the job lacks or the kind that takes none. The one thing
  // of a planned job that changes after planning (internally locked).
  virtual absl::StatusOr<Faults> AddFaults(Faults /*faults*/, int /*from_step*/) const {
    return absl::FailedPreconditionError("only training jobs take faults while they run; a collective or a "
                                         "matmul takes them when submitted");
  }
  // The kill_worker and pause_worker faults its first attempt sets off
  // (training), so that a worker lost to one is named as the job's own doing.
  virtual std::vector<WorkerFault> WorkerFaults() const { return {}; }
  // Every fault added so far (sent to the workers with each step).
  virtual Faults AddedFaults() const { return {}; }
  // The shared DCN fabric's slowdown for `step` (core/pod/dcn_fabric.h;
  // none: the job has all of its NICs), told before the step goes out. A
  // kind whose jobs' links can be slowed keeps it with its added faults,
  // which the step runs with and reports. Matmul jobs take the whole pod,
  // never share the fabric, and ignore it.
  virtual void ShareDcn(int /*step*/, const std::optional<SlowLink>& /*share*/) const {}
};

class JobKind {
 public:
  virtual ~JobKind() = default;
  // The name specs carry (JobSpec::kind) and errors show: "collective".
  virtual std::string name() const = 0;
  // Whether the chips' step results carry trace spans worth keeping.
  virtual bool traced() const { return false; }
  // Checks `spec` (of this kind) and plans it on the pod that runs at
  // `time_scale`.
  virtual absl::StatusOr<std::unique_ptr<PlannedJob>> Plan(const JobSpec& spec, const Topology& topo,
                                                           double time_scale) const = 0;
  // `spec` to run again from the checkpoint after `done` steps (0: from the
  // start); a kind without checkpoints says why it cannot.
  virtual absl::StatusOr<JobSpec> Resumed(const JobSpec& spec, int done) const {
    return absl::FailedPreconditionError("a " + name() + " job cannot be resumed; submit it again");
  }
};

}  // namespace tpuemu
