#include "client/processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tpuemu {

std::string FindBinary(const std::string& name) {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto sibling = self.parent_path() / name;
    if (std::filesystem::exists(sibling)) return sibling.string();
  }
  return name;  // execvp searches PATH
}

absl::StatusOr<int> SpawnDetached(const std::vector<std::string>& argv, const std::string& log_path) {
  const pid_t pid = fork();
  if (pid < 0) return absl::ResourceExhaustedError("fork failed: too many processes?");
  if (pid == 0) {
    setsid();  // survive the CLI and its terminal's Ctrl-C
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
      close(fd);
    }
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  return pid;
}

bool ProcessAlive(int pid) {
  // Reap it if it is our exited child, so it does not linger as a zombie.
  int status;
  if (waitpid(pid, &status, WNOHANG) == pid) return false;
  if (kill(pid, 0) != 0) return false;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string skip, state;
  stat >> skip >> skip >> state;
  return state != "Z";
}

int StopProcesses(const std::vector<int>& pids, double grace_s) {
  for (int pid : pids) {
    if (ProcessAlive(pid)) kill(pid, SIGTERM);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int>(grace_s * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    bool any = false;
    for (int pid : pids) any = any || ProcessAlive(pid);
    if (!any) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  int left = 0;
  for (int pid : pids) {
    if (ProcessAlive(pid)) {
      kill(pid, SIGKILL);
      ++left;
    }
  }
  return left;
}

std::string TailFile(const std::string& path, int lines) {
  std::ifstream in(path);
  std::deque<std::string> last;
  for (std::string line; std::getline(in, line);) {
    last.push_back(line);
    if (static_cast<int>(last.size()) > lines) last.pop_front();
  }
  return absl::StrJoin(last, "\n");
}

}  // namespace tpuemu
