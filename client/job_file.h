// Reading a job file for `submit` and `reference`: at most kMaxJobFileBytes,
// whatever the path names (a huge file, /dev/zero, a pipe), so a wrong path
// is a clear error instead of a process that grows until it is killed.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace tpuemu {

// The file's text; InvalidArgument (exit 2) naming the path and the limit
// when it cannot be read or holds more than the limit.
absl::StatusOr<std::string> ReadJobFile(const std::string& path);

}  // namespace tpuemu
