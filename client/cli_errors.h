// How CLI commands end on an error: the message on stderr, exit code 2 for
// bad input (the user can fix the command line) and 1 for everything else.
// Core's messages name fields; the user reads them as the CLI's flags.
#pragma once

#include <iostream>

#include "absl/status/status.h"
#include "services/flag_names.h"

namespace tpuemu {

inline int Fail(const absl::Status& s) {
  std::cerr << "error: " << WithFlagNames(s.message()) << "\n";
  return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

}  // namespace tpuemu
