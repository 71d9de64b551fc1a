#include "core/train/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tpuemu {
namespace {

constexpr char kMagic[8] = {'T', 'P', 'U', 'E', 'C', 'K', 'P', '1'};

struct Header {
  char magic[8];
  uint64_t job;
  int64_t step;
  int64_t chip;
  uint64_t bytes;
  uint64_t checksum;  // FNV-1a over the state
};

uint64_t Fnv1a(const std::string& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string JobDir(const std::string& dir, uint64_t job) { return absl::StrCat(dir, "/job-", job); }

std::string StepDir(const std::string& dir, uint64_t job, int step) {
  return absl::StrCat(JobDir(dir, job), "/step-", step);
}

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::UnavailableError(absl::StrCat("checkpoint: ", what, " ", path, ": ", std::strerror(errno)));
}

// Writes all of `data` to `fd`.
bool WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

absl::Status SyncDir(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno("opening", path);
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  return ok ? absl::OkStatus() : Errno("syncing", path);
}

}  // namespace

bool CheckpointDue(const TrainConfig& config, int step) {
  return config.checkpoint_every > 0 && (step + 1) % config.checkpoint_every == 0 && step + 1 < config.steps;
}

std::string CheckpointPath(const std::string& dir, uint64_t job, int step, int chip) {
  return absl::StrCat(StepDir(dir, job, step), "/chip-", chip, ".ckpt");
}

absl::Status WriteCheckpoint(const std::string& dir, uint64_t job, int step, int chip, const std::string& state,
                             int keep_from) {
  const std::string step_dir = StepDir(dir, job, step);
  std::error_code ec;
  std::filesystem::create_directories(step_dir, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("checkpoint: creating ", step_dir, ": ", ec.message()));
  const std::string path = CheckpointPath(dir, job, step, chip);
  const std::string tmp = path + ".tmp";
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.job = job;
  h.step = step;
  h.chip = chip;
  h.bytes = state.size();
  h.checksum = Fnv1a(state);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("creating", tmp);
  const bool written = WriteAll(fd, reinterpret_cast<const char*>(&h), sizeof h) &&
                       WriteAll(fd, state.data(), state.size()) && ::fsync(fd) == 0;
  const int saved_errno = errno;
  ::close(fd);
  if (!written) {
    errno = saved_errno;
    ::unlink(tmp.c_str());
    return Errno("writing", tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Errno("renaming to", path);
  if (auto s = SyncDir(step_dir); !s.ok()) return s;
  // This chip's older files: the step before this one may still be the
  // latest complete checkpoint (another chip may fail to write this one).
  for (const auto& entry : std::filesystem::directory_iterator(JobDir(dir, job), ec)) {
    const std::string name = entry.path().filename().string();
    int old = 0;
    if (absl::StartsWith(name, "step-") && absl::SimpleAtoi(name.substr(5), &old) && old < keep_from) {
      std::filesystem::remove(absl::StrCat(entry.path().string(), "/chip-", chip, ".ckpt"), ec);
      std::filesystem::remove(entry.path(), ec);  // once empty (every chip's file gone)
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadCheckpoint(const std::string& dir, uint64_t job, int step, int chip) {
  const std::string path = CheckpointPath(dir, job, step, chip);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("checkpoint of chip ", chip, " (steps 0-", step - 1, " done) of job-", job,
                                            " is missing: ", path, " (", std::strerror(errno),
                                            "); a resume needs the worker's --checkpoint-dir as it was"));
  }
  Header h{};
  in.read(reinterpret_cast<char*>(&h), sizeof h);
  std::string state;
  if (in && std::memcmp(h.magic, kMagic, sizeof kMagic) == 0 && h.bytes < (uint64_t{1} << 40)) {
    state.resize(h.bytes);
    in.read(state.data(), static_cast<std::streamsize>(h.bytes));
  }
  if (!in || std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.job != job || h.step != step || h.chip != chip ||
      Fnv1a(state) != h.checksum) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint ", path, " is damaged or is not job-", job, "'s of chip ", chip, " after step ", step - 1,
        " (its header or checksum does not match): put the file back from a copy to resume, or submit the job "
        "file again to run it from step 0"));
  }
  return state;
}

void RemoveCheckpoints(const std::string& dir, uint64_t job) {
  std::error_code ec;
  std::filesystem::remove_all(JobDir(dir, job), ec);
}

std::vector<uint64_t> CheckpointedJobs(const std::string& dir) {
  std::vector<uint64_t> jobs;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    uint64_t job = 0;
    // Named exactly as JobDir names it: "job-007" is not job 7's.
    if (absl::StartsWith(name, "job-") && absl::SimpleAtoi(name.substr(4), &job) &&
        name == absl::StrCat("job-", job) && entry.is_directory(ec)) {
      jobs.push_back(job);
    }
  }
  std::sort(jobs.begin(), jobs.end());
  return jobs;
}

}  // namespace tpuemu
