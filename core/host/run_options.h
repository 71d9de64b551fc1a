// How a chip runs its share of one job on its host: the job's number and tags,
// the wire format, where transfers are traced, and the job's abort.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/host/chip_result.h"
#include "core/pod/faults.h"
#include "core/wire/job_abort.h"

namespace tpuemu {

struct RunOptions {
  uint64_t job = 0;
  // ORed into every chunk tag, so that several collectives of one job (the
  // steps of a matmul) never mistake each other's chunks.
  uint64_t tag_base = 0;
  // Round what crosses links to bf16 (training's wire_dtype: bf16): frames
  // carry rounded copies instead of lending the buffer.
  bool wire_bf16 = false;
  // When set, every transfer this chip books on a link is recorded here.
  std::vector<TraceEvent>* trace = nullptr;
  // The job's abort, which its compute checks (its receives are woken by the
  // mailbox's). Shared by the job's chips on this host.
  std::shared_ptr<JobAbort> abort = std::make_shared<JobAbort>();
  // A backstop only: a job whose peer is lost is aborted by the coordinator
  // (or by this host's failing chip) long before this.
  absl::Duration recv_timeout = absl::Seconds(120);
  // Where the host's chips keep checkpoints (training's checkpoint_every).
  std::string checkpoint_dir;
  // Faults the job asked for (core/pod/faults.h), in force from their steps
  // on; `step` is the one running. Null: none.
  const Faults* faults = nullptr;
  int step = 0;
  // How this process kills or freezes itself for a training job's
  // kill_worker or pause_worker; empty in-process.
  WorkerFaultAction worker_fault_action;
};

}  // namespace tpuemu
