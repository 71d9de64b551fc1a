// How core's errors name the field of a request they refuse: in backquotes,
// `bytes` or `chips_per_host`, as a job file spells the key. Core does not know
// how each front end spells its settings; the CLI turns these into its flag
// names (services/flag_names.h), a job file's reader can show them as they are.
#pragma once

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tpuemu {

inline std::string Field(absl::string_view name) { return absl::StrCat("`", name, "`"); }

}  // namespace tpuemu
