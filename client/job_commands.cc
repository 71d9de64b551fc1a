#include "client/job_commands.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "views/chrome_trace.h"
#include "client/cli_checks.h"
#include "core/job/record.h"
#include "client/cli_errors.h"
#include "client/coordinator_client.h"
#include "services/flag_names.h"
#include "client/job_file.h"
#include "views/job_json.h"
#include "views/job_views.h"
#include "client/interrupt.h"
#include "client/job_wait.h"
#include "client/pod_state.h"
#include "client/progress.h"
#include "client/reference_command.h"
#include "views/worker_memory.h"
#include "services/coordinator_service.h"
#include "services/train_proto.h"

namespace tpuemu {
namespace {

struct JobOptions {
  std::string path;
  std::string output;
  std::string id;
  bool wait = false;
  bool json = false;
  int priority = 0;
  std::string coordinator;
  std::vector<std::string> states, kinds;  // `jobs` shows only these (empty: all)
};

// Whether `jobs --state/--kind` keeps the job.
bool Shown(const JobOptions& o, const v1::Job& job) {
  auto in = [](const std::vector<std::string>& set, const std::string& v) {
    return set.empty() || std::find(set.begin(), set.end(), v) != set.end();
  };
  return in(o.states, JobState(job)) && in(o.kinds, ViewOf(job).kind);
}

absl::StatusOr<std::unique_ptr<CoordinatorClient>> Connect(const std::string& coordinator) {
  auto address = ResolveCoordinator(coordinator);
  if (!address.ok()) return address.status();
  return std::make_unique<CoordinatorClient>(*address);
}

// Interrupted while it follows a job, the CLI says how to find it again:
// the job runs on the pod whoever watches it.
OnInterrupt LeftRunning(const std::string& id) {
  return OnInterrupt([id] {
    std::fprintf(stderr, "stopped following %s, which the pod goes on with: `tpuemu watch %s` follows it again, "
                 "`tpuemu cancel %s` stops it\n", id.c_str(), id.c_str(), id.c_str());
  });
}

// The pod's job store could not write what this job's record says: the
// user hears it wherever the record is shown, on stderr.
void WarnIfUnsaved(const v1::Job& job) {
  if (!job.unsaved().empty()) std::fprintf(stderr, "warning: %s: %s\n", job.id().c_str(), job.unsaved().c_str());
}

// Follows a job to its end: a line per finished step on stdout (unless
// quiet) and a progress bar on stderr. Returns the final job.
absl::StatusOr<v1::Job> Follow(CoordinatorClient& client, const std::string& id, bool quiet) {
  Progress progress(true);
  int64_t printed = 0;  // steps
  int total = 0;        // steps the job will run
  std::vector<std::string> faults;  // in force at the last step printed
  int restarts = -1;                // as the first update said
  auto last = WaitForJob(client, id, [&](const v1::Job& job) {
    // Resumed since the last update: the steps after its checkpoint run
    // again, with their own records, and are printed again.
    if (restarts >= 0 && job.restarts() > restarts) {
      if (!quiet) {
        progress.Done();
        std::printf("resumed: %s\n", job.restart_reason().c_str());
      }
      printed = std::min<int64_t>(printed, job.checkpoint_step());
    }
    restarts = job.restarts();
    // The job holds its latest steps' records only: those of steps this
    // follower fell behind on may be gone.
    for (; printed < job.steps_dropped() + job.steps_size(); ++printed) {
      if (quiet) continue;
      progress.Done();
      if (printed < job.steps_dropped()) {
        std::printf("(steps %lld..%lld: their records were dropped before this watch read them)\n",
                    static_cast<long long>(printed), static_cast<long long>(job.steps_dropped() - 1));
        printed = job.steps_dropped() - 1;
      } else {
        const v1::TrainStep& step = job.steps(static_cast<int>(printed - job.steps_dropped()));
        std::vector<std::string> now(step.faults().begin(), step.faults().end());
        if (now != faults) {  // said when they change, not on every row
          std::printf("faults and contention from step %d: %s\n", step.step(),
                      now.empty() ? "none" : absl::StrJoin(now, "; ").c_str());
          faults = std::move(now);
        }
        std::printf("%s\n", StepLine(step).c_str());
      }
      std::fflush(stdout);
    }
    if (total == 0) total = std::max(1, ViewOf(job).steps(job));
    const int width = 30, done = static_cast<int>(std::min<int64_t>(width, width * StepsDone(job) / total));
    ShowJobProgress(progress, job, absl::StrCat(id, " [", std::string(done, '#'), std::string(width - done, '.'),
                                                "] ", StepsDone(job), "/", total, " steps"));
  });
  progress.Done();
  return last;
}

int Finish(const v1::Job& job, bool json) {
  WarnIfUnsaved(job);
  if (json) {
    std::cout << JobJson(job).dump(2) << "\n";
  } else if (job.state() == v1::JOB_STATE_SUCCEEDED) {
    ViewOf(job).print_succeeded(job);
    if (const std::string memory = WorkerMemoryLine(job); !memory.empty()) std::printf("%s\n", memory.c_str());
  }
  if (job.state() == v1::JOB_STATE_SUCCEEDED) return 0;
  std::cerr << "error: " << job.id() << " " << WithFlagNames(HowItEnded(job)) << "\n";
  return 1;
}

int Submit(const JobOptions& o) {
  // Read and checked here, once: a bad file fails without a pod, and the
  // job travels typed.
  auto spec = ReadJobFile(o.path);
  if (!spec.ok()) return Fail(spec.status());
  auto client = Connect(o.coordinator);
  if (!client.ok()) return Fail(client.status());
  v1::SubmitJobRequest req;
  *req.mutable_train() = ToProto(*spec);
  req.set_priority(o.priority);
  auto job = (*client)->Submit(req);
  if (!job.ok()) return Fail(NamingTheFile(job.status(), spec->config.name, o.path));
  if (!o.wait) {
    if (o.json) {
      std::cout << JobJson(*job).dump(2) << "\n";
    } else {
      std::printf("%s submitted; follow it with `tpuemu watch %s`\n", job->id().c_str(), job->id().c_str());
    }
    return 0;
  }
  const OnInterrupt note = LeftRunning(job->id());
  auto done = Follow(**client, job->id(), o.json);
  if (!done.ok()) return Fail(done.status());
  return Finish(*done, o.json);
}

int List(const JobOptions& o) {
  auto client = Connect(o.coordinator);
  if (!client.ok()) return Fail(client.status());
  auto list = (*client)->List();
  if (!list.ok()) return Fail(list.status());
  if (o.json) {
    nlohmann::json all = nlohmann::json::array();
    for (const v1::Job& j : list->jobs()) {
      if (!Shown(o, j)) continue;
      // Each job's step records (up to 1000 each) made a list of 88 jobs
      // 15 MB: the list counts them, `status ID --json` has them.
      nlohmann::json row = JobJson(j);
      row.erase("steps");
      row["steps_done"] = StepsDone(j);
      all.push_back(std::move(row));
    }
    std::cout << nlohmann::json{{"jobs", all},
                                {"finished_jobs_dropped", list->finished_jobs_dropped()},
                                {"finished_jobs_kept", list->finished_jobs_kept()}}
                     .dump(2)
              << "\n";
    return 0;
  }
  // The "on" column is as wide as its longest entry ("the 2x2 block at (2,0) of slice 1").
  int on_width = 10;
  int shown = 0;
  for (const v1::Job& j : list->jobs()) {
    if (!Shown(o, j)) continue;
    on_width = std::max(on_width, static_cast<int>(PlacementText(j).size()));
    ++shown;
  }
  if (shown == 0) {
    std::printf(list->jobs().empty() ? "no jobs yet: `tpuemu submit FILE` runs one (examples/jobs/)\n"
                                     : "no jobs of that state or kind (`tpuemu jobs` lists them all)\n");
  } else {
    std::printf("%-10s %-10s %-11s %5s %-*s %6s  %s\n", "id", "kind", "state", "queue", on_width, "on", "steps",
                "what");
  }
  for (const v1::Job& j : list->jobs()) {
    if (!Shown(o, j)) continue;
    const JobView& view = ViewOf(j);
    const std::string queue = j.queue_position() > 0 ? absl::StrCat("#", j.queue_position()) : "-";
    std::printf("%-10s %-10s %-11s %5s %-*s %6lld  %s\n", j.id().c_str(), view.kind, JobState(j).c_str(),
                queue.c_str(), on_width, PlacementText(j).c_str(), static_cast<long long>(StepsDone(j)),
                view.what(j).c_str());
  }
  if (list->finished_jobs_dropped() > 0) {
    std::printf("(%llu older finished jobs not shown: the coordinator keeps the last %d finished jobs)\n",
                static_cast<unsigned long long>(list->finished_jobs_dropped()), list->finished_jobs_kept());
  }
  return 0;
}

int Status(const JobOptions& o) {
  auto client = Connect(o.coordinator);
  if (!client.ok()) return Fail(client.status());
  auto job = (*client)->Get(o.id);
  if (!job.ok()) return Fail(job.status());
  WarnIfUnsaved(*job);
  if (o.json) {
    std::cout << JobJson(*job).dump(2) << "\n";
    return 0;
  }
  const JobView& view = ViewOf(*job);
  std::printf("%s (%s): %s%s\n", job->id().c_str(), view.kind, JobState(*job).c_str(),
              job->error().empty() ? "" : (": " + WithFlagNames(job->error())).c_str());
  std::printf("what: %s\n", view.what(*job).c_str());
  if (job->queue_position() > 0) {
    std::printf("queued #%d: %s\n", job->queue_position(),
                job->waiting_for().empty() ? "starting now" : ("waiting for " + job->waiting_for()).c_str());
  } else if (job->started_unix_s() > 0) {
    std::printf("%s on %s\n", job->state() == v1::JOB_STATE_RUNNING ? "runs" : "ran", PlacementText(*job).c_str());
  }
  if (job->checkpoint_step() > 0) {
    // checkpoint_step counts the steps done; the step lines count from 0.
    const bool resumable = IsTerminal(job->state()) && job->state() != v1::JOB_STATE_SUCCEEDED;
    std::printf("checkpoint: steps 0-%d done (checkpoint_every: %d)%s\n", job->checkpoint_step() - 1,
                job->train().config().checkpoint_every(),
                resumable ? absl::StrCat("; `tpuemu resume` starts at step ", job->checkpoint_step()).c_str() : "");
  }
  if (job->restarts() > 0) {
    std::printf("resumed %d time(s)%s, the last: %s\n", job->restarts(),
                job->automatic_restarts() > 0 ? absl::StrCat(" (", job->automatic_restarts(), " by max_restarts)").c_str()
                                              : "",
                WithFlagNames(job->restart_reason()).c_str());
  }
  view.print_status(*job);
  if (const std::string memory = WorkerMemoryLine(*job); !memory.empty()) std::printf("%s\n", memory.c_str());
  return 0;
}

int Watch(const JobOptions& o) {
  auto client = Connect(o.coordinator);
  if (!client.ok()) return Fail(client.status());
  const OnInterrupt note = LeftRunning(o.id);
  auto done = Follow(**client, o.id, false);
  if (!done.ok()) return Fail(done.status());
  return Finish(*done, false);
}

int Cancel(const JobOptions& o) {
  auto client = Connect(o.coordinator);
  if (!client.ok()) return Fail(client.status());
  // A job that has ended is kept as it ended and the cancel does nothing,
  // which a script should hear (exit 1).
  auto before = (*client)->Get(o.id);
  if (!before.ok()) return Fail(before.status());
  if (before->state() != v1::JOB_STATE_PENDING && before->state() != v1::JOB_STATE_RUNNING) {
    return Fail(absl::FailedPreconditionError(absl::StrCat(o.id, " has already ended (", JobState(*before),
                                                           "): nothing to cancel (`tpuemu status ", o.id, "`)")));
  }
  auto job = (*client)->Cancel(o.id);
  if (!job.ok()) return Fail(job.status());
  auto done = Follow(**client, o.id, true);
  if (!done.ok()) return Fail(done.status());
  std::printf("%s: %s\n", o.id.c_str(), JobState(*done).c_str());
  WarnIfUnsaved(*done);
  return done->state() == v1::JOB_STATE_CANCELLED ? 0 : 1;  // it may have ended on its own meanwhile
}

int Resume(const JobOptions& o) {
  auto client = Connect(o.coordinator);
  if (!client.ok()) return Fail(client.status());
  auto job = (*client)->Resume(o.id);
  if (!job.ok()) return Fail(job.status());
  WarnIfUnsaved(*job);
  if (!o.wait) {
    if (o.json) {
      std::cout << JobJson(*job).dump(2) << "\n";
    } else {
      std::printf("%s queued again: %s; follow it with `tpuemu watch %s`\n", job->id().c_str(),
                  job->restart_reason().c_str(), job->id().c_str());
    }
    return 0;
  }
  const OnInterrupt note = LeftRunning(o.id);
  auto done = Follow(**client, o.id, o.json);
  if (!done.ok()) return Fail(done.status());
  return Finish(*done, o.json);
}

// What a trace kept and dropped, after it was written, on `to`.
void SayWhatTheTraceKept(std::FILE* to, const ChromeTraceWriter& writer, const std::string& id,
                         const std::string& where) {
  const v1::TraceExtent& kept = writer.extent();
  std::fprintf(to, "wrote %lld spans of %s to %s; open it in https://ui.perfetto.dev\n",
               static_cast<long long>(writer.spans()), id.c_str(), where.c_str());
  if (kept.spans_dropped() > 0) {
    std::fprintf(to, "kept steps %lld..%lld of %lld, %llu spans dropped: %s\n",
                 static_cast<long long>(kept.first_kept_step()), static_cast<long long>(kept.last_kept_step()),
                 static_cast<long long>(kept.steps()), static_cast<unsigned long long>(kept.spans_dropped()),
                 kept.dropped_why().c_str());
  } else if (kept.first_kept_step() > 0) {
    // Nothing dropped, yet it starts late: the steps before ran under a
    // coordinator that has since restarted (a resumed job goes on).
    std::fprintf(to, "kept steps %lld..%lld: steps 0..%lld are not in it, as they ran before the coordinator's "
                     "last restart (it keeps traces in memory)\n",
                 static_cast<long long>(kept.first_kept_step()), static_cast<long long>(kept.last_kept_step()),
                 static_cast<long long>(kept.first_kept_step() - 1));
  }
}

// Why a job's trace has no spans, and what to do.
absl::Status NoSpans(CoordinatorClient& client, const std::string& id, const v1::TraceExtent& kept) {
  auto job = client.Get(id);
  if (job.ok() && job->state() == v1::JOB_STATE_PENDING) {
    return absl::FailedPreconditionError(
        absl::StrCat(id, " has not started, so it has no trace yet; `tpuemu watch ", id, "` follows it"));
  }
  const bool finished = job.ok() && job->state() != v1::JOB_STATE_PENDING && job->state() != v1::JOB_STATE_RUNNING;
  if (job.ok() && job->state() == v1::JOB_STATE_RUNNING && StepsDone(*job) == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(id, " has not finished a step yet, so its trace is empty; try again in a moment"));
  }
  if (finished && StepsDone(*job) == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(id, " ended before its first step was done, so it has no trace; `tpuemu status ", id,
                     "` says how it ended"));
  }
  if (kept.spans_dropped() > 0) {
    return absl::FailedPreconditionError(absl::StrCat(id, " has no spans kept: ", kept.dropped_why()));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      id, " has no spans kept: the coordinator keeps traces in memory, so a job it ran before its last restart "
      "has none; submit it again to trace it"));
}

int Trace(const JobOptions& o) {
  if (o.output.empty()) return Fail(absl::InvalidArgumentError("-o: give the file to write, e.g. -o trace.json"));
  auto client = Connect(o.coordinator);
  if (!client.ok()) return Fail(client.status());
  if (o.output == "-") {
    // Standard output, piece by piece as it is read (a pipe cannot be
    // written whole or not at all, as a file is); what was written goes to
    // standard error.
    ChromeTraceWriter writer(std::cout);
    absl::Status read = (*client)->Trace(o.id, [&](const v1::JobTrace& piece) {
      writer.Add(piece);
      return std::cout ? absl::OkStatus() : absl::InternalError("writing the trace to standard output failed");
    });
    if (!read.ok()) return Fail(read);
    if (writer.spans() == 0) return Fail(NoSpans(**client, o.id, writer.extent()));  // nothing written
    writer.Finish();
    std::cout.flush();
    if (!std::cout) return Fail(absl::InternalError("writing the trace to standard output failed"));
    SayWhatTheTraceKept(stderr, writer, o.id, "standard output");
    return 0;
  }
  ChromeTraceFile file(o.output, "-o");
  if (auto s = file.Open(); !s.ok()) return Fail(s);
  absl::Status read = (*client)->Trace(o.id, [&](const v1::JobTrace& piece) { return file.Add(piece); });
  if (!read.ok()) return Fail(read);
  // Nothing is written rather than an empty trace.
  if (file.writer().spans() == 0) return Fail(NoSpans(**client, o.id, file.writer().extent()));
  if (auto s = file.Commit(); !s.ok()) return Fail(s);
  SayWhatTheTraceKept(stdout, file.writer(), o.id, o.output);
  return 0;
}

}  // namespace

void AddJobCommands(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<JobOptions>();
  auto coordinator = [o](CLI::App* c) {
    c->add_option("--coordinator", o->coordinator,
                  "coordinator HOST:PORT (default: $TPUEMU_COORDINATOR, else the pod `cluster up` started)");
  };
  auto* submit = app.add_subcommand("submit", "submit a training job file to the pod");
  submit->footer(
      "Seed 001's model trained with the data, fsdp, tensor and pipeline parallelism its mesh keys ask\n"
      "for (the seeds' algorithms), every step reported. Example:\n"
      "  tpuemu submit examples/jobs/dp.yaml --wait\n"
      "Details: docs/jobs.md\n\n" +
      JobKeysHelp());
  submit->add_option("job", o->path, "JOB.yaml")->required();
  submit->add_flag("--wait", o->wait, "follow the job to its end, a line per step");
  submit->add_flag("--json", o->json, "print the job as JSON (with --wait: the finished job, as `status --json`)");
  submit->add_option("--priority", o->priority,
                     "place in the queue: higher goes ahead of queued jobs of lower priority, never of running "
                     "ones (-1000 to 1000)")
      ->check(WholeNumberFrom(-kMaxPriority, kMaxPriority))
      ->default_val(0);
  coordinator(submit);
  submit->callback([o, exit_code] { *exit_code = Submit(*o); });

  auto* jobs = app.add_subcommand(
      "jobs", "list the pod's jobs, oldest first, with their place in the queue and the slices they run on");
  jobs->add_flag("--json", o->json,
                 "print {\"jobs\": [...]}, each job as `status --json` has it but with steps_done for its\n"
                 "steps array (`status ID --json` has the steps)");
  jobs->add_option("--state", o->states, "show only jobs in these states (comma-separated)")
      ->delimiter(',')
      ->check(CLI::IsMember({"pending", "running", "succeeded", "failed", "cancelled", "interrupted"}));
  jobs->add_option("--kind", o->kinds, "show only jobs of these kinds (comma-separated)")
      ->delimiter(',')
      ->check(CLI::IsMember({"train", "collective", "matmul"}));
  jobs->footer(
      "The coordinator keeps every job's record in its job store (--data-dir; a local pod's is\n"
      "$TPUEMU_HOME/jobs): a coordinator started again lists them as before. `on` is where a job\n"
      "runs or ran: the whole pod, or the slices a job with num_slices fewer than the pod's was\n"
      "given (docs/jobs.md, \"Many jobs on one pod\"). Examples:\n"
      "  tpuemu jobs --state pending,running      what is queued and what runs\n"
      "  tpuemu jobs --state failed --json        why jobs failed, for scripts");
  coordinator(jobs);
  jobs->callback([o, exit_code] { *exit_code = List(*o); });

  auto* status = app.add_subcommand("status", "show one job: state, mesh, memory per chip, every finished step");
  status->add_option("job", o->id, "job id, e.g. job-3 (or 3)")->required()->transform(JobId());
  status->add_flag("--json", o->json, "print the job as JSON, with its steps array");
  coordinator(status);
  status->callback([o, exit_code] { *exit_code = Status(*o); });

  auto* watch = app.add_subcommand("watch", "follow a job: a line per step and a progress bar, until it ends");
  watch->add_option("job", o->id, "job id (job-3, or 3)")->required()->transform(JobId());
  coordinator(watch);
  watch->callback([o, exit_code] { *exit_code = Watch(*o); });

  auto* trace = app.add_subcommand("trace", "write a training job's trace as Chrome/Perfetto JSON (emulated clock)");
  trace->footer(
      "A track per chip (compute ops, collectives, waits) and per directed link (transfers). Example:\n"
      "  tpuemu trace job-1 -o trace.json     # then open it in https://ui.perfetto.dev\n"
      "  tpuemu trace job-1 -o - | gzip > trace.json.gz");
  trace->add_option("job", o->id, "job id (job-3, or 3)")->required()->transform(JobId());
  trace->add_option("-o,--output", o->output, "the JSON file to write ('-': standard output)")->required();
  coordinator(trace);
  trace->callback([o, exit_code] { *exit_code = Trace(*o); });

  auto* resume = app.add_subcommand(
      "resume", "run a failed, cancelled or interrupted job again from its latest checkpoint (or the start)");
  resume->add_option("job", o->id, "job id (job-3, or 3)")->required()->transform(JobId());
  resume->add_flag("--wait", o->wait, "follow the job to its end, a line per step");
  resume->add_flag("--json", o->json, "print the job as JSON (with --wait: the finished job, as `status --json`)");
  resume->footer(
      "A training job with checkpoint_every: N keeps every chip's parameters and optimizer state every N\n"
      "steps (each worker in its --checkpoint-dir). Resumed, it runs again under the same id, from the\n"
      "latest checkpoint every worker wrote, on the same mesh, and ends with the parameters and loss an\n"
      "uninterrupted run has, bit for bit. max_restarts: K does this by itself after a lost worker.\n"
      "Example:\n"
      "  tpuemu resume job-4 --wait");
  coordinator(resume);
  resume->callback([o, exit_code] { *exit_code = Resume(*o); });

  auto* cancel = app.add_subcommand(
      "cancel", "cancel a job: it stops within a step; the pod stays usable. A job that has already ended stays\n"
                "as it ended, and cancel exits 1");
  cancel->add_option("job", o->id, "job id (job-3, or 3)")->required()->transform(JobId());
  coordinator(cancel);
  cancel->callback([o, exit_code] { *exit_code = Cancel(*o); });
}

}  // namespace tpuemu
