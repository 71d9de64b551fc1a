// How CLI commands end on an error: the message on stderr, exit code 2 for
// bad input (the user can fix the command line) and 1 for everything else.
// Core's messages name fields; the user reads them as the CLI's flags.
#pragma once

#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/interrupt.h"
#include "core/base/utf8.h"
#include "services/flag_names.h"

namespace tpuemu {

// A topology refused for its chips per host, when the user gave no
// --chips-per-host, blamed a value they never typed: it says it is the default.
inline absl::Status SayingTheDefaultChipsPerHost(const absl::Status& s, int chips_per_host, bool given) {
  if (given || s.ok() || !absl::StrContains(s.message(), "chips_per_host")) return s;
  return absl::Status(s.code(),
                      absl::StrCat(s.message(), " (", chips_per_host, " is the default: give --chips-per-host N)"));
}

// `message` safe on a terminal, its lines kept: errors quote what a job
// file or a flag held, and an escape sequence there must not reach the
// terminal (core/base/utf8.h).
inline std::string TerminalSafe(const std::string& message) {
  std::vector<std::string> lines = absl::StrSplit(message, '\n');
  for (std::string& line : lines) line = PrintableText(line);
  return absl::StrJoin(lines, "\n");
}

inline int Fail(const absl::Status& s) {
  AwaitInterruptExit();  // an interrupt being handled owns the ending
  std::cerr << "error: " << TerminalSafe(WithFlagNames(s.message())) << "\n";
  return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

}  // namespace tpuemu
