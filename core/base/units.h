// Byte sizes as people write them (64KiB, 8MiB, 1GiB, 4096, 1MB), and times
// (3, 0.5, 500ms, 30s, 2m).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tpuemu {

absl::StatusOr<uint64_t> ParseBytes(const std::string& text, const std::string& field);
absl::StatusOr<std::vector<uint64_t>> ParseByteList(const std::string& csv, const std::string& field);
std::string FormatBytes(uint64_t bytes);
// A size to read, 4 significant digits in the largest unit it reaches:
// "1 B", "1023 B", "1.5 GiB", "384 MiB" (never "0.375 GiB").
std::string FormatSize(double bytes);
// A time above 0 and at most `max`: seconds (3, 0.5) or with a unit (500ms,
// 30s, 2m, 1h). Errors name `field` and the text.
absl::StatusOr<absl::Duration> ParseDuration(const std::string& text, const std::string& field, absl::Duration max);
// 3 significant digits in s, ms, us or ns: "12.3 us".
std::string FormatSeconds(double seconds);

}  // namespace tpuemu
