#include "worker/self_faults.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmath>

#include "spdlog/spdlog.h"

namespace tpuemu {

void CarryOutOnThisProcess(const WorkerFault& fault) {
  spdlog::warn("fault on purpose: {}", fault.Describe());
  spdlog::default_logger()->flush();
  if (fault.kill) {
    kill(getpid(), SIGKILL);
    return;
  }
  const pid_t self = getpid();
  const pid_t waker = fork();
  if (waker == 0) {
    // The child of a threaded process: async-signal-safe calls only.
    timespec t{static_cast<time_t>(fault.pause_s),
               static_cast<long>(std::fmod(fault.pause_s, 1.0) * 1e9)};
    while (nanosleep(&t, &t) != 0) {
    }
    kill(self, SIGCONT);
    _exit(0);
  }
  if (waker < 0) {
    spdlog::error("pause_worker: fork failed; not frozen");
    return;
  }
  kill(self, SIGSTOP);
  waitpid(waker, nullptr, 0);
  spdlog::warn("fault on purpose over: frozen for {} s, going on", fault.pause_s);
}

}  // namespace tpuemu
