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

}  // namespace tpuemu
