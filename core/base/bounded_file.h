// Reading a small file the user names (a job file, a model file, a chip
// profile, a token, a CA): at most `limit` bytes, whatever the path names (a
// huge file, /dev/zero, a pipe), so that a wrong path is a clear error
// instead of a process that grows until it is killed.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace tpuemu {

// The file's text; InvalidArgument when it cannot be read or holds more than
// `limit` bytes, each message starting "WHAT 'PATH': " (what: "job file",
// "model file", ...) and, past the limit, saying what it may hold.
absl::StatusOr<std::string> ReadFileAtMost(const std::string& path, size_t limit, const std::string& what);

}  // namespace tpuemu
