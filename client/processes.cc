#include "client/processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/interrupt.h"

namespace tpuemu {
namespace {

std::string BootId() {
  std::string id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> id;
  return id;
}

// State (field 3) and start time (field 22) of /proc/PID/stat; false when
// the process does not exist. Fields are counted after the command name,
// which is in parentheses and may itself hold spaces and parentheses.
bool ReadStat(int pid, char& state, uint64_t& start_ticks) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::stringstream text;
  text << in.rdbuf();
  const std::string stat = text.str();
  const size_t name_end = stat.rfind(')');
  if (!in || name_end == std::string::npos) return false;
  const std::vector<std::string> fields =
      absl::StrSplit(stat.substr(name_end + 1), ' ', absl::SkipEmpty());  // fields 3, 4, ...
  if (fields.size() < 20 || fields[0].empty()) return false;
  state = fields[0][0];
  return absl::SimpleAtoi(fields[19], &start_ticks);
}

}  // namespace

std::string FindBinary(const std::string& name) {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto sibling = self.parent_path() / name;
    if (std::filesystem::exists(sibling)) return sibling.string();
  }
  return name;  // execvp searches PATH
}

constexpr char kStartMarker[] = "--- started by tpuemu";

absl::StatusOr<StartedProcess> SpawnDetached(const std::vector<std::string>& argv, const std::string& log_path) {
  const pid_t pid = fork();
  if (pid < 0) return absl::ResourceExhaustedError("fork failed: too many processes?");
  if (pid == 0) {
    setsid();  // survive the CLI and its terminal's Ctrl-C
    UnblockInterruptsInChild();
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    // Where this start's lines begin: a failed start's error shows them only
    // (an earlier pod's lines came first, and the one that mattered last).
    (void)!write(STDOUT_FILENO, kStartMarker, sizeof(kStartMarker) - 1);
    (void)!write(STDOUT_FILENO, "\n", 1);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  // The child is not reaped before this reads its start time (it keeps it
  // across exec), so the entry exists even if exec already failed.
  StartedProcess p{pid, BootId(), 0, argv, log_path};
  char state = 0;
  if (!ReadStat(pid, state, p.start_ticks)) {
    return absl::InternalError(absl::StrCat("cannot read /proc/", pid, "/stat of the process just started"));
  }
  return p;
}

bool IsRunning(const StartedProcess& p) {
  if (p.pid <= 0 || p.boot_id != BootId()) return false;
  // Reap it if it is our exited child, so it does not linger as a zombie.
  int status;
  if (waitpid(p.pid, &status, WNOHANG) == p.pid) return false;
  char state = 0;
  uint64_t start_ticks = 0;
  return ReadStat(p.pid, state, start_ticks) && state != 'Z' && start_ticks == p.start_ticks;
}

std::vector<StartedProcess> SignalTerm(const std::vector<StartedProcess>& processes) {
  std::vector<StartedProcess> ours;
  for (const StartedProcess& p : processes) {
    if (IsRunning(p)) {
      kill(p.pid, SIGTERM);
      // A stopped process (a pause_worker fault, a Ctrl-Z) takes its SIGTERM
      // only once it runs again; it was waited for and then SIGKILLed.
      kill(p.pid, SIGCONT);
      ours.push_back(p);
    }
  }
  return ours;
}

int StopProcesses(const std::vector<StartedProcess>& processes, double grace_s) {
  const std::vector<StartedProcess> ours = SignalTerm(processes);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int>(grace_s * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    bool any = false;
    for (const StartedProcess& p : ours) any = any || IsRunning(p);
    if (!any) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  int left = 0;
  for (const StartedProcess& p : ours) {
    if (IsRunning(p)) {
      kill(p.pid, SIGKILL);
      ++left;
    }
  }
  return left;
}

std::vector<StartedProcess> FindProcesses(const std::function<bool(const std::vector<std::string>& argv)>& match) {
  std::vector<StartedProcess> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid) || pid == getpid()) continue;
    struct stat st {};
    if (stat(entry.path().c_str(), &st) != 0 || st.st_uid != getuid()) continue;
    std::ifstream in(entry.path() / "cmdline");
    std::stringstream text;
    text << in.rdbuf();
    std::vector<std::string> argv = absl::StrSplit(text.str(), '\0', absl::SkipEmpty());
    StartedProcess p{pid, BootId(), 0, std::move(argv), ""};
    char state = 0;
    if (!p.argv.empty() && match(p.argv) && ReadStat(pid, state, p.start_ticks) && state != 'Z') found.push_back(p);
  }
  return found;
}

std::string TailOfLastStart(const std::string& path, int lines) {
  std::ifstream in(path);
  std::deque<std::string> last;
  for (std::string line; std::getline(in, line);) {
    if (line == kStartMarker) {  // what came before is an earlier start's
      last.clear();
      continue;
    }
    last.push_back(line);
    if (static_cast<int>(last.size()) > lines) last.pop_front();
  }
  return absl::StrJoin(last, "\n");
}

}  // namespace tpuemu
