// Reading a job file for `submit`, `reference`, `simulate` and `plan`: at
// most kMaxJobFileBytes (core/base/bounded_file.h). The file is parsed here,
// once; the job travels typed from here on.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "core/train/job.h"

namespace tpuemu {

// The job the file describes, checked, with the path as its source;
// InvalidArgument (exit 2) naming the path and the limit when it cannot be
// read or holds more than the limit, or naming the key, the value and what
// is allowed when the job is wrong.
// `shape_only`: read as values: none, whatever the file says.
absl::StatusOr<TrainSpec> ReadJobFile(const std::string& path, bool shape_only = false);

}  // namespace tpuemu
