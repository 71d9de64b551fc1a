// A chip's training state on disk between steps (issue 16): its weight
// shards and optimizer moments after `step` steps of job `job`, one file per
// chip, written by the worker that owns the chip:
//   DIR/job-JOB/step-STEP/chip-CHIP.ckpt
// Written whole to a temporary name, synced, then renamed, so that a file
// under its final name is complete; a checksum catches one damaged later. A
// step's checkpoint counts only once every chip of the job wrote its file:
// the coordinator records that step, and a resume reads only such a step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/train/config.h"

namespace tpuemu {

// Whether a job with `config` writes a checkpoint after step `step` (counted
// from 0): every checkpoint_every steps, but not after the last.
bool CheckpointDue(const TrainConfig& config, int step);

std::string CheckpointPath(const std::string& dir, uint64_t job, int step, int chip);

// Writes `state` as chip `chip`'s checkpoint; then drops the job's
// checkpoints from before `keep_from` (each chip's own files).
absl::Status WriteCheckpoint(const std::string& dir, uint64_t job, int step, int chip, const std::string& state,
                             int keep_from);
// The state WriteCheckpoint wrote, checked against its header and checksum.
absl::StatusOr<std::string> ReadCheckpoint(const std::string& dir, uint64_t job, int step, int chip);
// Removes every checkpoint of the job under `dir` (it finished, or nothing
// will resume it).
void RemoveCheckpoints(const std::string& dir, uint64_t job);
// The jobs with checkpoints under `dir` (a job-N directory each), in order;
// none when `dir` is missing or unreadable.
std::vector<uint64_t> CheckpointedJobs(const std::string& dir);

}  // namespace tpuemu
