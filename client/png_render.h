// An SVG document rendered to PNG (`tpuemu plot -o FILE.png`, `bench
// collective --plot FILE.png`): librsvg draws it with cairo at its own size
// in pixels, text in the machine's sans-serif font (fontconfig; Debian's
// fonts-dejavu-core).
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace tpuemu {

// The PNG file's bytes; `scale` 2 doubles both sides (sharper on HiDPI screens).
absl::StatusOr<std::string> RenderPng(const std::string& svg, double scale = 1);

}  // namespace tpuemu
