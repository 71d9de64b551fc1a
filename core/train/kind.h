// Training as a job kind (core/host/job_kind.h): a TrainSpec checked and laid
// on the pod once, run a step at a time, each step summarised as a
// StepReport and the whole job as a TrainReport.
#pragma once

#include <memory>

#include "core/host/job_kind.h"

namespace tpuemu {

std::unique_ptr<JobKind> MakeTrainKind();

}  // namespace tpuemu
