// Byte sizes as people write them (64KiB, 8MiB, 1GiB, 4096, 1MB), and times.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tpuemu {

absl::StatusOr<uint64_t> ParseBytes(const std::string& text, const std::string& field);
absl::StatusOr<std::vector<uint64_t>> ParseByteList(const std::string& csv, const std::string& field);
std::string FormatBytes(uint64_t bytes);
// 3 significant digits in s, ms, us or ns: "12.3 us".
std::string FormatSeconds(double seconds);

}  // namespace tpuemu
