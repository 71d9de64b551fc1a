#include "client/job_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/train/config.h"
#include "core/train/job.h"

namespace tpuemu {
namespace {

absl::Status TooLarge(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("JOB.yaml '", path, "': ", what, "; a job file may hold at most ",
                                                 kMaxJobFileBytes, " bytes (1 MiB)"));
}

absl::StatusOr<std::string> ReadText(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat("JOB.yaml: cannot read '", path, "': ", std::strerror(errno)));
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { close(fd); }
  } closer{fd};
  struct stat st {};
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<size_t>(st.st_size) > kMaxJobFileBytes) {
    return TooLarge(path, absl::StrCat(st.st_size, " bytes"));
  }
  // One byte past the limit tells "too large" from "exactly at the limit"
  // for input whose size is unknown ahead (devices, pipes).
  std::string text(kMaxJobFileBytes + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = read(fd, text.data() + got, text.size() - got);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InvalidArgumentError(absl::StrCat("JOB.yaml: cannot read '", path, "': ", std::strerror(errno)));
    }
    got += static_cast<size_t>(n);
  }
  if (got > kMaxJobFileBytes) {
    return TooLarge(path, S_ISREG(st.st_mode) ? "it grew past the limit while being read"
                                              : "more than the limit (not a regular file; reading stopped there)");
  }
  text.resize(got);
  return text;
}

}  // namespace

absl::StatusOr<TrainSpec> ReadJobFile(const std::string& path, bool shape_only) {
  auto text = ReadText(path);
  if (!text.ok()) return text.status();
  return ParseTrainSpec(*text, path, shape_only);
}

}  // namespace tpuemu
