// A file a command is to write (a chart, a trace): checked before anything
// runs, so that a wrong path is a usage error at once, not a failure after
// the work it was to hold; then written so that nothing else on the way is
// harmed.
#pragma once

#include <fstream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tpuemu {

// InvalidArgument naming `flag` and `path` when the path is a directory, or
// its directory does not exist or is not writable by this process (or, for a
// pipe or a device, when the process may not write to it).
absl::Status CheckOutputFile(const std::string& flag, const std::string& path);

// Writes a command's output to `path`. A regular file (or a new one) is
// written beside itself under a name of its own, made exclusively, and moved
// into place, keeping its mode, only once complete: a reader never sees half
// of it, and a failed write leaves the old one. A pipe or a device
// (/dev/stdout, /dev/null) is written into directly, as a shell's `>` does,
// never replaced. A symbolic link is written through, to its target.
class OutputFile {
 public:
  // `flag` names the option the path came from, in errors ("-o", "--trace").
  static absl::StatusOr<std::unique_ptr<OutputFile>> Open(const std::string& flag, const std::string& path);
  ~OutputFile();  // without a Commit: what was written so far goes, the target stays as it was

  std::ostream& stream() { return out_; }
  // An error when anything written failed (a full disk) or the move failed.
  absl::Status Commit();

 private:
  OutputFile(std::string path, std::string target, std::string tmp)
      : path_(std::move(path)), target_(std::move(target)), tmp_(std::move(tmp)) {}
  std::string path_;    // as given, for messages
  std::string target_;  // symbolic links followed
  std::string tmp_;     // empty: written in place
  std::ofstream out_;
  bool committed_ = false;
};

}  // namespace tpuemu
