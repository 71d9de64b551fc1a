// The web view's files (web/assets/), built into the binary by
// web/embed_assets.cmake so that a pod serves its page with no files beside
// it and no network.
#pragma once

#include <string_view>
#include <vector>

namespace tpuemu {

struct WebAsset {
  std::string_view path;          // "/app.js"; index.html is served at "/"
  std::string_view content_type;
  std::string_view body;
};

const std::vector<WebAsset>& WebAssets();

}  // namespace tpuemu
