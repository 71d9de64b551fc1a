// The programs' words for core's: core names the field it refuses (`bytes`,
// `chips_per_host`, core/base/field.h); the CLI and the servers' mains show their flag for it
// (--bytes, --chips-per-host), so a message points at what to change on the
// command line.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace tpuemu {

// `message` with every field the CLI has a flag for written as that flag.
std::string WithFlagNames(absl::string_view message);

}  // namespace tpuemu
