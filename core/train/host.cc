#include "core/train/host.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/tensor/blis_kernel.h"
#include "core/pod/host_memory.h"
#include "core/host/job.h"
#include "core/wire/run_number.h"
#include "core/train/checkpoint.h"

namespace tpuemu {
namespace {

// The first chip's failure, if any.
absl::Status FirstError(const std::vector<absl::Status>& chips) {
  for (const absl::Status& s : chips) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

HostTrainer::HostTrainer(const TrainConfig& config, const TrainMesh& mesh, HostNetwork& net, uint64_t job,
                         std::shared_ptr<JobAbort> abort, TrainCheckpoints checkpoints,
                         WorkerFaultAction worker_fault_action)
    : HostJob(net, job, kPodHostBytes),
      config_(config),
      mesh_(mesh),
      net_(net),
      checkpoints_(std::move(checkpoints)),
      worker_fault_action_(std::move(worker_fault_action)) {
  options_.job = job;
  options_.abort = std::move(abort);
}

std::vector<ChipCheck> HostTrainer::Check() {
  // Every step ran: nothing will resume from the job's checkpoints.
  if (config_.checkpoint_every > 0) RemoveCheckpoints(checkpoints_.dir, JobOfRun(options_.job));
  std::vector<ChipCheck> checks(chips_.size());
  OnThreads(chips_.size(), [&](size_t i) {
    checks[i].chip = net_.local_chips()[i];
    checks[i].param_squares = chips_[i]->ParamSquares();
  });
  return checks;
}

absl::Status HostTrainer::AddFaults(const Faults& added) {
  const Faults all = config_.faults.With(added);
  for (const auto& chip : chips_) chip->SetFaults(all);
  return absl::OkStatus();
}

absl::Status HostTrainer::Prepare() {
  if (!chips_.empty()) return absl::OkStatus();
  // Here, not in the first timed multiply (it forks and self-tests); a
  // shape-only job multiplies nothing.
  if (!config_.shape_only()) EnsureBlisKernel();
  for (int chip : net_.local_chips()) {
    chips_.push_back(std::make_unique<ChipTrainer>(config_, mesh_, chip, net_, options_.job, options_.abort));
  }
  // The teacher and its outputs are the same on every chip that makes
  // targets: one copy here. A shape-only job makes no targets; a model with
  // a vocabulary has no teacher.
  std::shared_ptr<TeacherTargets> targets;
  if (!config_.shape_only() && !config_.embeddings() &&
      std::any_of(chips_.begin(), chips_.end(), [](const auto& c) { return c->last_stage(); })) {
    targets = std::make_shared<TeacherTargets>(
        config_, std::make_shared<const ModelWeights>(InitWeights(config_, WeightStream::kTeacher)));
  }
  // A chip's target rows are its batch shard's: the host's last-stage chips
  // of that shard take each of them.
  auto shard = [&](size_t i) { return mesh_.BatchIndex(net_.local_chips()[i]); };
  std::map<int, int> takers;  // by batch shard
  for (size_t i = 0; i < chips_.size(); ++i) takers[shard(i)] += chips_[i]->last_stage() ? 1 : 0;
  OnThreads(chips_.size(), [&](size_t i) { chips_[i]->Prepare(targets, takers.at(shard(i))); });
  if (checkpoints_.resume_step == 0) return absl::OkStatus();
  std::vector<absl::Status> restored(chips_.size());
  OnThreads(chips_.size(), [&](size_t i) {
    auto state = ReadCheckpoint(checkpoints_.dir, JobOfRun(options_.job), checkpoints_.resume_step,
                                net_.local_chips()[i]);
    restored[i] = state.ok() ? chips_[i]->RestoreState(*state) : state.status();
  });
  return FirstError(restored);
}

absl::Status HostTrainer::SaveCheckpoint(int done) {
  std::vector<absl::Status> saved(chips_.size());
  OnThreads(chips_.size(), [&](size_t i) {
    saved[i] = WriteCheckpoint(checkpoints_.dir, JobOfRun(options_.job), done, net_.local_chips()[i], chips_[i]->SaveState(),
                               /*keep_from=*/done - config_.checkpoint_every);
  });
  return FirstError(saved);
}

absl::Status HostTrainer::WorkerFaultsAt(int step) {
  if (config_.faults.workers.empty()) return absl::OkStatus();
  // A worker holds one host's chips; the in-process pod holds them all.
  std::set<int> hosts;
  for (int chip : net_.local_chips()) hosts.insert(net_.topology().HostOf(chip));
  for (const WorkerFault& fault : config_.faults.workers) {
    if (!hosts.contains(fault.host) || fault.at_step != step) continue;
    if (!worker_fault_action_) {
      return absl::FailedPreconditionError(absl::StrCat(
          fault.Describe(), ": kill_worker and pause_worker need a pod of worker processes (tpuemu cluster up)"));
    }
    // A resumed attempt (core/wire/run_number.h) runs on: the fault happened once.
    if (!FirstAttempt(options_.job)) continue;
    worker_fault_action_(fault);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ChipRunResult>> HostTrainer::Run(int step) {
  if (auto s = WorkerFaultsAt(step); !s.ok()) return s;
  std::vector<absl::StatusOr<ChipRunResult>> results(chips_.size(), absl::UnknownError("not run"));
  auto ran = RunChips(
      net_, options_, chips_.size(),
      [&](size_t i) {
        results[i] = chips_[i]->Step(step);
        return results[i].status();
      },
      [&](size_t i) { return results[i]; });
  // After the step, outside what it times: host I/O, not the chips' work.
  if (ran.ok() && CheckpointDue(config_, step)) {
    if (auto s = SaveCheckpoint(step + 1); !s.ok()) return s;
  }
  return ran;
}

}  // namespace tpuemu
