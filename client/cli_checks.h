// Checks on command-line values that CLI11 does not make itself.
#pragma once

#include <cstdint>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"

namespace tpuemu {

// An unsigned 64-bit value as written: CLI11 2.3 reads "-1" into an unsigned
// option as 2^64 - 1, and a number too big for it as the largest, both
// without a word.
inline CLI::Validator WholeNumber64() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        uint64_t value;
        return absl::SimpleAtoi(text, &value) ? "" : "'" + text + "': expected a whole number from 0 to 2^64 - 1";
      },
      "UINT64");
}

// A job id as `jobs` shows it ("job-3"), or its number alone ("3").
inline CLI::Validator JobId() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) text = "job-" + text;
        return "";
      },
      "JOB");
}

}  // namespace tpuemu
