// Collectives as a job kind (core/host/job_kind.h): a CollectiveSpec planned
// into transfers, run once, summarised as a CollectiveReport.
#pragma once

#include <memory>

#include "core/host/job_kind.h"

namespace tpuemu {

std::unique_ptr<JobKind> MakeCollectiveKind();

}  // namespace tpuemu
