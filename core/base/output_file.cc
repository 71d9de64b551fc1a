#include "core/base/output_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace tpuemu {

namespace fs = std::filesystem;

namespace {

// `path` with its symbolic links followed, as far as they lead (a link to a
// file not made yet leads to that file's name).
fs::path Target(const std::string& path) {
  fs::path target(path);
  std::error_code error;
  for (int hops = 0; hops < 40 && fs::is_symlink(target, error); ++hops) {
    const fs::path next = fs::read_symlink(target, error);
    if (error) break;
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  return target;
}

bool IsSpecial(const fs::path& path) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  return fs::exists(status) && !fs::is_regular_file(status) && !fs::is_directory(status);
}

}  // namespace

absl::Status CheckOutputFile(const std::string& flag, const std::string& path) {
  const fs::path file = Target(path);
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  std::error_code error;
  if (fs::is_directory(file, error)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, ": is a directory; give a file's name"));
  }
  if (IsSpecial(file)) {
    if (access(file.c_str(), W_OK) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, ": this user may not write to it"));
    }
    return absl::OkStatus();
  }
  if (!fs::is_directory(dir, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": there is no directory ", dir.string(), "; make it first, or write elsewhere"));
  }
  if (access(dir.c_str(), W_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": this user may not write in ", dir.string(), "; write elsewhere"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<OutputFile>> OutputFile::Open(const std::string& flag, const std::string& path) {
  if (auto s = CheckOutputFile(flag, path); !s.ok()) return s;
  const fs::path target = Target(path);
  if (IsSpecial(target)) {
    std::unique_ptr<OutputFile> file(new OutputFile(path, target.string(), ""));
    file->out_.open(target, std::ios::binary);
    if (!file->out_) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, ": cannot write to it: ", std::strerror(errno)));
    }
    return file;
  }
  // A name of its own beside the target (the same file system, so the move
  // is a rename), made only if nothing has it: never another file, nor a
  // link planted there.
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmp = (dir / ("." + target.filename().string() + ".XXXXXX")).string();
  const int fd = mkstemp(tmp.data());
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, ": cannot write beside it: ", std::strerror(errno)));
  }
  // The mode the file has, or a new file's (mkstemp makes it 0600).
  struct stat st;
  mode_t mode;
  if (stat(target.c_str(), &st) == 0) {
    mode = st.st_mode & 07777;
  } else {
    const mode_t mask = umask(0);
    umask(mask);
    mode = 0666 & ~mask;
  }
  const bool moded = fchmod(fd, mode) == 0;
  close(fd);
  std::unique_ptr<OutputFile> file(new OutputFile(path, target.string(), tmp));
  file->out_.open(tmp, std::ios::binary | std::ios::trunc);
  if (!moded || !file->out_) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, ": cannot write beside it: ", std::strerror(errno)));
  }
  return file;
}

OutputFile::~OutputFile() {
  if (committed_ || tmp_.empty()) return;
  out_.close();
  std::remove(tmp_.c_str());
}

absl::Status OutputFile::Commit() {
  out_.close();
  if (!out_) return absl::InternalError(absl::StrCat("writing '", path_, "' failed (disk full?)"));
  if (!tmp_.empty() && std::rename(tmp_.c_str(), target_.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("writing '", path_, "' failed: ", std::strerror(errno)));
  }
  committed_ = true;
  return absl::OkStatus();
}

}  // namespace tpuemu
