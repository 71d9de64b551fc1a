// The JSON every command prints for a job, one shape per job kind, so that
// `submit --wait --json`, `status --json` and the benchmarks agree.
#pragma once

#include <string>

#include "nlohmann/json.hpp"
#include "tpuemu/v1/services.grpc.pb.h"

namespace tpuemu {

nlohmann::json CollectiveJson(const v1::Job& job);
// `job` empty: a plan that has not run.
nlohmann::json MatmulJson(const v1::MatmulResult& r, const std::string& job);
nlohmann::json TrainStepJson(const v1::TrainStep& step, const v1::TrainSummary& summary);
// A training job's keys: source, steps, steps_dropped, summary.
void AddTrainJson(const v1::Job& job, nlohmann::json& out);
// Any job: id, state, error, kind, times and the kind's keys (views/job_views.h).
nlohmann::json JobJson(const v1::Job& job);
// "pending" | "running" | "succeeded" | "failed" | "cancelled" | "interrupted"
std::string JobState(const v1::Job& job);
// Where the job runs or ran ("slice 1", "slices 0-1", "whole pod"); "-"
// before it started.
std::string PlacementText(const v1::Job& job);
// A job that did not succeed: "was cancelled", "failed: why", "was interrupted: why".
std::string HowItEnded(const v1::Job& job);

}  // namespace tpuemu
