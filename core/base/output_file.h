// A file a command is to write (a chart, a trace): checked before anything
// runs, so that a wrong path is a usage error at once, not a failure after
// the work it was to hold.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace tpuemu {

// InvalidArgument naming `flag` and `path` when the path is a directory, or
// its directory does not exist or is not writable by this process.
absl::Status CheckOutputFile(const std::string& flag, const std::string& path);

}  // namespace tpuemu
