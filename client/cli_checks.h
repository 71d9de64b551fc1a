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

// A job id as `jobs` shows it ("job-3"), or its number alone ("3", "03");
// anything else is a usage error, not a job that does not exist.
inline CLI::Validator JobId() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const auto digits = [](const std::string& s) {
          return !s.empty() && s.size() <= 19 && s.find_first_not_of("0123456789") == std::string::npos;
        };
        if (digits(text)) text = "job-" + text;
        uint64_t number;
        if (text.rfind("job-", 0) == 0 && digits(text.substr(4)) && absl::SimpleAtoi(text.substr(4), &number)) {
          text = "job-" + std::to_string(number);  // job-01 is job-1
          return "";
        }
        return "'" + text + "': expected a job id such as job-3, or its number, 3 (`tpuemu jobs` lists them)";
      },
      "JOB");
}

// A step, a count or an index into an int: 0 to 2147483647 (CLI11's
// NonNegativeNumber says "not in range 0.000000 to 1797693134862315708...",
// and a number past an int's range got its bare "Could not convert").
inline CLI::Validator ZeroOrMore() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        int value;
        return absl::SimpleAtoi(text, &value) && value >= 0
                   ? ""
                   : "'" + text + "': expected a whole number from 0 to 2147483647";
      },
      "N");
}

// A whole number from `low` to `high` (CLI11's own refusal of "abc" for an
// int, "Could not convert", names neither the kind of value nor the range).
inline CLI::Validator WholeNumberFrom(int64_t low, int64_t high) {
  return CLI::Validator(
      [low, high](std::string& text) -> std::string {
        int64_t value;
        return absl::SimpleAtoi(text, &value) && value >= low && value <= high
                   ? ""
                   : "'" + text + "': expected a whole number from " + std::to_string(low) + " to " +
                         std::to_string(high);
      },
      "N");
}

// A file to write, given: not empty (which would read as "not given" and
// write nothing), nor `-` (these files are written as the command runs,
// beside what it prints).
inline CLI::Validator FileToWrite() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (text.empty()) return "'': give the file to write";
        if (text == "-") return "'-': give a file (standard output carries the command's own table)";
        return "";
      },
      "FILE");
}

// Seconds to wait: above 0 and at most a week (beyond it a deadline in
// milliseconds overflows, and no wait here needs more).
inline constexpr double kMaxWaitSeconds = 7 * 24 * 3600;
inline CLI::Validator PositiveSeconds() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double value;
        return absl::SimpleAtod(text, &value) && value > 0 && value <= kMaxWaitSeconds
                   ? ""
                   : "'" + text + "': expected a number of seconds above 0 and at most " +
                         std::to_string(static_cast<int>(kMaxWaitSeconds)) + " (a week)";
      },
      "SECONDS");
}

}  // namespace tpuemu
