// How the CLI shows a job of each kind: the one place the client tells kinds
// apart (by the spec the job carries, v1::Job.spec), so that a new kind adds
// its row here and `jobs`, `status`, `watch`, `submit` and --json follow.
#pragma once

#include <cstdint>
#include <string>

#include "nlohmann/json.hpp"
#include "tpuemu/v1/services.grpc.pb.h"

namespace tpuemu {

struct JobView {
  const char* kind;                                      // "collective" | "matmul" | "train"
  int (*steps)(const v1::Job& job);                      // steps the job runs, for progress bars
  std::string (*what)(const v1::Job& job);               // `tpuemu jobs`' last column
  void (*add_json)(const v1::Job& job, nlohmann::json& out);  // the kind's keys in JobJson
  void (*print_status)(const v1::Job& job);              // `tpuemu status`, below the state line
  void (*print_succeeded)(const v1::Job& job);           // `watch` and `submit --wait`, once it succeeded
};

const JobView& ViewOf(const v1::Job& job);

// Steps finished, those whose records were dropped included (a collective
// or a matmul is one step, finished once it succeeded).
int64_t StepsDone(const v1::Job& job);
// A training step as `status`, `watch` and `submit --wait` print it.
std::string StepLine(const v1::TrainStep& step);

}  // namespace tpuemu
