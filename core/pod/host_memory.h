// How much host memory a job's chips may hold together, the one limit every
// kind of job (collective, matmul, training) is checked against before
// anything is allocated: a local pod's chips all share this machine, and an
// allocation that fails on a worker fails the whole job.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tpuemu {

inline constexpr double kPodHostBytes = 12.0 * (1ull << 30);

// Refuses `bytes` of host memory for the pod's `chips` chips when above the
// limit, naming what the user asked for (`what`: the flag or keys and their
// values), the figure, the limit and `remedy`.
inline absl::Status CheckPodHostBytes(double bytes, int chips, const std::string& what, const std::string& remedy) {
  if (bytes <= kPodHostBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, ": the pod's ", chips, " chips would hold about ",
                                                 static_cast<int64_t>(bytes / (1 << 20)),
                                                 " MiB of host memory (limit ",
                                                 static_cast<int64_t>(kPodHostBytes / (1 << 20)), " MiB); ", remedy));
}

}  // namespace tpuemu
