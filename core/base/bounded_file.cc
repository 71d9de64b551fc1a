#include "core/base/bounded_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/base/units.h"
#include "core/base/utf8.h"

namespace tpuemu {

absl::StatusOr<std::string> ReadFileAtMost(const std::string& path, size_t limit, const std::string& what) {
  const std::string named = absl::StrCat(what, " '", PrintableText(path), "': ");
  const auto too_large = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat(named, why, "; a ", what, " may hold at most ", limit, " bytes (", FormatBytes(limit), ")"));
  };
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::InvalidArgumentError(absl::StrCat(named, "cannot read it: ", std::strerror(errno)));
  struct FdCloser {
    int fd;
    ~FdCloser() { close(fd); }
  } closer{fd};
  struct stat st {};
  if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) return absl::InvalidArgumentError(named + "a directory, not a file");
  if (S_ISREG(st.st_mode) && static_cast<size_t>(st.st_size) > limit) {
    return too_large(absl::StrCat(st.st_size, " bytes"));
  }
  // One byte past the limit tells "too large" from "exactly at the limit"
  // for input whose size is unknown ahead (devices, pipes).
  std::string text(limit + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = read(fd, text.data() + got, text.size() - got);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InvalidArgumentError(absl::StrCat(named, "cannot read it: ", std::strerror(errno)));
    }
    got += static_cast<size_t>(n);
  }
  if (got > limit) {
    return too_large(S_ISREG(st.st_mode) ? "it grew past the limit while being read"
                                         : "more than the limit (not a regular file; reading stopped there)");
  }
  text.resize(got);
  return text;
}

}  // namespace tpuemu
