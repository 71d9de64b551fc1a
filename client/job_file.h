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

// The pod (or a pod in this process) refuses a job with messages that begin
// with its name, with "job" where a check has no name at hand, or with the
// key ("dp-small: out of memory ...", "job: num_chips: 3 ...", "faults:
// kill_worker ..."): they are said naming the file, which is what the user
// edits. A flag's refusal (`priority`) is not the file's.
absl::Status NamingTheFile(const absl::Status& refusal, const std::string& name, const std::string& path);

}  // namespace tpuemu
