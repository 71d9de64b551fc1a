#include "core/base/output_file.h"

#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace tpuemu {

absl::Status CheckOutputFile(const std::string& flag, const std::string& path) {
  const std::filesystem::path file(path);
  const std::filesystem::path dir = file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
  std::error_code error;
  if (std::filesystem::is_directory(file, error)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, ": is a directory; give a file's name"));
  }
  if (!std::filesystem::is_directory(dir, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": there is no directory ", dir.string(), "; make it first, or write elsewhere"));
  }
  if (access(dir.c_str(), W_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": this user may not write in ", dir.string(), "; write elsewhere"));
  }
  return absl::OkStatus();
}

}  // namespace tpuemu
