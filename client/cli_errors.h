// How CLI commands end on an error: the message on stderr, exit code 2 for
// bad input (the user can fix the command line) and 1 for everything else.
#pragma once

#include <iostream>

#include "absl/status/status.h"

namespace tpuemu {

inline int Fail(const absl::Status& s) {
  std::cerr << "error: " << s.message() << "\n";
  return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

}  // namespace tpuemu
