#include "services/flag_names.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_replace.h"
#include "core/base/field.h"

namespace tpuemu {

std::string WithFlagNames(absl::string_view message) {
  // Fields core names, by the flag of the commands that set them.
  static const auto* const kFlags = new std::vector<std::pair<std::string, std::string>>{
      {Field("algorithm"), "--algorithm"},
      {Field("axes"), "--axes"},
      {Field("bytes"), "--bytes"},
      {Field("chips_per_host"), "--chips-per-host"},
      {Field("chunk"), "--chunk"},
      {Field("dims"), "--dims"},
      {Field("dtype"), "--dtype"},
      {Field("mesh"), "--mesh"},
      {Field("num_slices"), "--num-slices"},
      {Field("faults"), "--slow-link/--straggler/--down-link"},
      {Field("from_step"), "--from-step"},
      {Field("op"), "--op"},
      {Field("priority"), "--priority"},
      {Field("slices"), "--slices"},
      {Field("time_scale"), "--time-scale"},
      {Field("topology"), "--topology"},
      {Field("values"), "--values"},
      {Field("wraparound"), "--wraparound"},
  };
  return absl::StrReplaceAll(message, *kFlags);
}

}  // namespace tpuemu
