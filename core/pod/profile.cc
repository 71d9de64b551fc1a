#include "core/pod/profile.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "core/base/bounded_file.h"
#include "core/base/flat_yaml.h"
#include "yaml-cpp/yaml.h"

namespace tpuemu {
namespace {

// Facts from the seeds (How To Scale Your Model parts 3 and 5). Per-hop ICI
// latency is the seeds' "about 1 us". DCN defaults are derived assumptions:
// part 5 gives a pod-level W_dcn of 5e13 B/s (bidirectional) for a v5p pod of
// 8960 chips = 2240 hosts of 4 chips, i.e. ~2.2e10 B/s per host, 1.1e10 each
// direction. DCN latency of 10 us is an assumption (not in the seeds).
constexpr double kDcnPerHostDir = 5e13 / 2240.0 / 2.0;
constexpr double kDcnLatency = 10e-6;

ChipProfile Make(const char* name, double c, double hbm, double hbm_bw, double ici,
                 int dims, WrapRule wrap) {
  ChipProfile p;
  p.name = name;
  p.flops_bf16 = c;
  p.hbm_bytes = hbm;
  p.hbm_bw = hbm_bw;
  p.ici_bw_dir = ici;
  p.ici_hop_latency = 1e-6;
  p.max_torus_dims = dims;
  p.wrap = wrap;
  p.dcn_bw_per_host_dir = kDcnPerHostDir;
  p.dcn_latency = kDcnLatency;
  return p;
}

// v5e as seed 000 measured it: an AllGather over Y = 4 (no wraparound, so a
// line of 3 hops) on a v5e 8x4 mesh took 680 us for a 34 MB bf16 array whose
// theory is 3 x 8.4e6 / 4.5e10 = 560 us, and "closer to 8 us" for a 128 KiB
// one whose latency alone gives 3 us. With the seeds' 1 us per hop kept, two
// numbers fit both: the link reaches a fraction e of its bandwidth and every
// collective pays s before its first byte moves. On this emulator's line
// (small: 3 hop latencies, the 32 KiB shard on the wire once and an eighth
// of it per further hop, cut-through; large: the busiest link's 3 shards
// plus one hop):
//   large: 3 x 8388608 / (4.5e10 e) + 1 us + s = 680 us
//   small: 3 us + 1.25 x 32768 / (4.5e10 e) + s = 8 us
// give e = 0.828 and s = 3.90 us (docs/collectives.md, "Measured profile").
ChipProfile V5eMeasured() {
  ChipProfile p = Make("v5e-measured", 1.97e14, 16e9, 8.1e11, 4.5e10, 2, WrapRule::kOnly16);
  p.ici_link_efficiency = 0.828;
  p.collective_startup = 3.90e-6;
  return p;
}

const std::map<std::string, ChipProfile>& Presets() {
  static const auto* presets = new std::map<std::string, ChipProfile>{
      {"v5p", Make("v5p", 4.59e14, 96e9, 2.8e12, 9.0e10, 3, WrapRule::kMultipleOf4)},
      {"v5e", Make("v5e", 1.97e14, 16e9, 8.1e11, 4.5e10, 2, WrapRule::kOnly16)},
      {"v5e-measured", V5eMeasured()},
      {"v6e", Make("v6e", 9.17e14, 32e9, 1.6e12, 9.0e10, 2, WrapRule::kOnly16)},
      {"v4", Make("v4", 2.75e14, 32e9, 1.2e12, 4.5e10, 3, WrapRule::kMultipleOf4)},
  };
  return *presets;
}

absl::StatusOr<WrapRule> ParseWrapRule(const std::string& s) {
  if (s == "multiple-of-4") return WrapRule::kMultipleOf4;
  if (s == "only-16") return WrapRule::kOnly16;
  if (s == "always") return WrapRule::kAlways;
  if (s == "never") return WrapRule::kNever;
  return absl::InvalidArgumentError(absl::StrCat(
      "profile key 'wraparound': '", s, "' is not a rule; allowed: multiple-of-4, only-16, always, never"));
}

}  // namespace

bool ChipProfile::AxisWraps(int size) const {
  switch (wrap) {
    case WrapRule::kMultipleOf4: return size >= 4 && size % 4 == 0;
    case WrapRule::kOnly16: return size == 16;
    case WrapRule::kAlways: return size >= 3;
    case WrapRule::kNever: return false;
  }
  return false;
}

std::string WrapRuleName(WrapRule rule) {
  switch (rule) {
    case WrapRule::kMultipleOf4: return "multiple-of-4";
    case WrapRule::kOnly16: return "only-16";
    case WrapRule::kAlways: return "always";
    case WrapRule::kNever: return "never";
  }
  return "?";
}

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  for (const auto& [name, _] : Presets()) names.push_back(name);
  return names;
}

absl::StatusOr<ChipProfile> PresetProfile(const std::string& name) {
  auto it = Presets().find(name);
  if (it == Presets().end()) {
    return absl::InvalidArgumentError(absl::StrCat("chip '", name, "' is not a preset; allowed: ",
                                                   absl::StrJoin(PresetNames(), ", "),
                                                   ", or a profile file path"));
  }
  return it->second;
}

bool LooksLikeProfileFile(const std::string& name) {
  return name.find('/') != std::string::npos || absl::EndsWith(name, ".yaml") || absl::EndsWith(name, ".yml");
}

absl::StatusOr<ChipProfile> LoadProfileFile(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "profile file '", path, "': ", std::filesystem::exists(path, error) ? "not a regular file" : "no such file",
        "; give the path of a chip profile file (docs/topology.md) or a preset: ", absl::StrJoin(PresetNames(), ", ")));
  }
  auto text = ReadFileAtMost(path, 1 << 20, "profile file");
  if (!text.ok()) return text.status();
  auto loaded = LoadFlatYamlMap(*text, absl::StrCat("profile file '", path, "'"));
  if (!loaded.ok()) return loaded.status();
  const YAML::Node& root = *loaded;
  ChipProfile p;
  if (root["base"]) {
    auto base = PresetProfile(root["base"].Scalar());
    if (!base.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("profile file '", path, "': base: ", base.status().message()));
    }
    p = *base;
  }
  p.name = path;
  const std::map<std::string, double*> numbers = {
      {"flops_bf16", &p.flops_bf16},       {"hbm_bytes", &p.hbm_bytes},
      {"hbm_bw", &p.hbm_bw},               {"ici_bw_dir", &p.ici_bw_dir},
      {"ici_hop_latency", &p.ici_hop_latency}, {"dcn_bw_per_host_dir", &p.dcn_bw_per_host_dir},
      {"dcn_latency", &p.dcn_latency}};
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    try {
      if (key == "base") continue;
      if (key == "name") { p.name = kv.second.Scalar(); continue; }
      if (key == "max_torus_dims") {
        auto dims = DecimalInteger(kv.second.Scalar());
        if (!dims.ok()) {
          return absl::InvalidArgumentError(absl::StrCat("profile file '", path, "': key 'max_torus_dims' ",
                                                         dims.status().message()));
        }
        p.max_torus_dims = static_cast<int>(std::clamp<int64_t>(*dims, -1, 4));  // 1..3, checked below
        continue;
      }
      if (key == "ici_link_efficiency") {
        p.ici_link_efficiency = kv.second.as<double>();
        if (!(p.ici_link_efficiency > 0 && p.ici_link_efficiency <= 1)) {
          return absl::InvalidArgumentError(absl::StrCat("profile file '", path,
                                                         "': key 'ici_link_efficiency' must be in (0, 1], got ",
                                                         p.ici_link_efficiency));
        }
        continue;
      }
      if (key == "collective_startup") {
        p.collective_startup = kv.second.as<double>();
        if (!(p.collective_startup >= 0 && p.collective_startup < 1)) {
          return absl::InvalidArgumentError(absl::StrCat("profile file '", path,
                                                         "': key 'collective_startup' must be seconds in [0, 1), got ",
                                                         p.collective_startup));
        }
        continue;
      }
      if (key == "wraparound") {
        auto rule = ParseWrapRule(kv.second.Scalar());
        if (!rule.ok()) {
          return absl::InvalidArgumentError(absl::StrCat("profile file '", path, "': ", rule.status().message()));
        }
        p.wrap = *rule;
        continue;
      }
      auto it = numbers.find(key);
      if (it == numbers.end()) {
        std::vector<std::string> allowed = {"base", "name", "max_torus_dims", "wraparound", "ici_link_efficiency",
                                            "collective_startup"};
        for (const auto& [k, _] : numbers) allowed.push_back(k);
        return absl::InvalidArgumentError(absl::StrCat("profile file '", path, "': unknown key '", key,
                                                       "'; allowed: ", absl::StrJoin(allowed, ", ")));
      }
      *it->second = kv.second.as<double>();
      if (!(*it->second > 0) || !std::isfinite(*it->second)) {
        return absl::InvalidArgumentError(absl::StrCat("profile file '", path, "': key '", key,
                                                       "' must be a number above 0, got ", kv.second.Scalar()));
      }
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat("profile file '", path, "': key '", key, "' has the wrong type: ", e.what()));
    }
  }
  for (const auto& [key, ptr] : numbers) {
    if (*ptr <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("profile file '", path, "': key '", key,
                                                     "' is missing (set it, or set 'base: v5p' etc.)"));
    }
  }
  if (p.max_torus_dims < 1 || p.max_torus_dims > 3) {
    return absl::InvalidArgumentError(absl::StrCat("profile file '", path, "': max_torus_dims must be 1..3, got ",
                                                   p.max_torus_dims));
  }
  return p;
}

}  // namespace tpuemu
