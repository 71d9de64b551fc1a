#include "core/base/units.h"

#include <cctype>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace tpuemu {

absl::StatusOr<uint64_t> ParseBytes(const std::string& text, const std::string& field) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  const std::string number = text.substr(0, i), unit = text.substr(i);
  uint64_t value = 0;
  struct U { const char* name; uint64_t mult; };
  static const U units[] = {{"", 1}, {"B", 1}, {"KiB", 1ULL << 10}, {"MiB", 1ULL << 20}, {"GiB", 1ULL << 30},
                            {"KB", 1000}, {"MB", 1000000}, {"GB", 1000000000}, {"K", 1ULL << 10},
                            {"M", 1ULL << 20}, {"G", 1ULL << 30}};
  if (!number.empty() && absl::SimpleAtoi(number, &value)) {
    for (const U& u : units) {
      if (unit == u.name && value > 0 && value <= (1ULL << 40) / u.mult) return value * u.mult;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(field, " '", text,
                                                 "': expected a positive size like 4096, 64KiB, 8MiB or 1GiB "
                                                 "(units B, KiB, MiB, GiB, KB, MB, GB; at most 1024 GiB)"));
}

absl::StatusOr<std::vector<uint64_t>> ParseByteList(const std::string& csv, const std::string& field) {
  std::vector<uint64_t> out;
  for (const auto& part : absl::StrSplit(csv, ',')) {
    auto v = ParseBytes(std::string(part), field);
    if (!v.ok()) return v.status();
    out.push_back(*v);
  }
  return out;
}

absl::StatusOr<absl::Duration> ParseDuration(const std::string& text, const std::string& field,
                                             absl::Duration max) {
  absl::Duration d;
  double seconds = 0;
  bool parsed = false;
  if (absl::SimpleAtod(text, &seconds) && std::isfinite(seconds)) {
    parsed = true;
    d = seconds > 0 ? absl::Seconds(seconds) : absl::ZeroDuration();
  } else if (!text.empty() && std::isdigit(static_cast<unsigned char>(text.back())) == 0) {
    parsed = absl::ParseDuration(text, &d);  // "500ms", "30s", "2m"
  }
  if (parsed && d > absl::ZeroDuration() && d <= max) return d;
  // Examples within the limit (a fault's delay is at most 1s).
  const char* examples = max >= absl::Minutes(2) ? "(3, 0.5) or with a unit (500ms, 30s, 2m)"
                                                 : "(0.5, 0.02) or with a unit (500ms, 20ms)";
  return absl::InvalidArgumentError(absl::StrCat(field, " '", text, "': expected a time above 0 and at most ",
                                                 absl::FormatDuration(max), ", in seconds ", examples));
}

std::string FormatBytes(uint64_t b) {
  if (b >= (1ULL << 30) && b % (1ULL << 30) == 0) return absl::StrCat(b >> 30, "GiB");
  if (b >= (1ULL << 20) && b % (1ULL << 20) == 0) return absl::StrCat(b >> 20, "MiB");
  if (b >= (1ULL << 10) && b % (1ULL << 10) == 0) return absl::StrCat(b >> 10, "KiB");
  return absl::StrCat(b, "B");
}

std::string FormatSize(double bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (u + 1 < 6 && bytes >= 1024) {
    bytes /= 1024;
    ++u;
  }
  return absl::StrFormat("%.4g %s", bytes, units[u]);
}

std::string FormatSeconds(double s) {
  const double a = s < 0 ? -s : s;
  if (a >= 1) return absl::StrFormat("%.3g s", s);
  if (a >= 1e-3) return absl::StrFormat("%.3g ms", s * 1e3);
  if (a >= 1e-6 || a == 0) return absl::StrFormat("%.3g us", s * 1e6);
  return absl::StrFormat("%.3g ns", s * 1e9);
}

}  // namespace tpuemu
