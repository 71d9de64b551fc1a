// Matmuls as a job kind (core/host/job_kind.h): a MatmulSpec planned once
// into a MatmulProgram, run once, summarised as a MatmulReport.
#pragma once

#include <memory>

#include "core/host/job_kind.h"

namespace tpuemu {

std::unique_ptr<JobKind> MakeMatmulKind();

}  // namespace tpuemu
