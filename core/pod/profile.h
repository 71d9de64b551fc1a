// Chip hardware profiles: the numbers the emulated clock runs on.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tpuemu {

// Which axes of a slice have a wraparound (torus) link.
enum class WrapRule {
  kMultipleOf4,  // v4, v5p: an axis wraps when its size is a multiple of 4
  kOnly16,       // v5e, v6e: only an axis of exactly 16 chips wraps
  kAlways,
  kNever,
};

struct ChipProfile {
  std::string name;
  double flops_bf16 = 0;      // C, FLOP/s
  double hbm_bytes = 0;       // HBM capacity
  double hbm_bw = 0;          // bytes/s
  double ici_bw_dir = 0;      // per link, each direction, bytes/s
  double ici_hop_latency = 0; // seconds per hop
  int max_torus_dims = 3;     // 2 for v5e/v6e, 3 for v4/v5p
  WrapRule wrap = WrapRule::kMultipleOf4;
  // DCN: per-host egress bandwidth (bytes/s, each direction) and one-way latency.
  double dcn_bw_per_host_dir = 0;
  double dcn_latency = 0;
  // What makes measured collectives slower than theory (1 and 0 in the
  // theory presets): the fraction of ici_bw_dir a collective's transfers
  // reach, and a fixed cost before every collective's first transfer.
  double ici_link_efficiency = 1;
  double collective_startup = 0;  // seconds

  bool AxisWraps(int size) const;
};

// Names of the built-in presets, for help texts and errors.
std::vector<std::string> PresetNames();

// A built-in preset (v5p, v5e, v6e, v4, and v5e-measured: v5e fitted to the
// seed's measured AllGathers).
absl::StatusOr<ChipProfile> PresetProfile(const std::string& name);

// A profile file (YAML, flat keys) starting from `base:` preset or from nothing;
// see docs/topology.md for the keys.
absl::StatusOr<ChipProfile> LoadProfileFile(const std::string& path);
// A chip name that is meant as a file: it has a / or ends in .yaml or .yml.
bool LooksLikeProfileFile(const std::string& name);

std::string WrapRuleName(WrapRule rule);

}  // namespace tpuemu
