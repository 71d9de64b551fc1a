#include "worker/self_faults.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>

#include "spdlog/spdlog.h"

namespace tpuemu {
namespace {

std::atomic<bool> continued{false};  // set by the SIGCONT handler
static_assert(std::atomic<bool>::is_always_lock_free);

}  // namespace

void CarryOutOnThisProcess(const WorkerFault& fault) {
  spdlog::warn("fault on purpose: {}", fault.Describe());
  spdlog::default_logger()->flush();
  if (fault.kill) {
    kill(getpid(), SIGKILL);
    return;
  }
  // The kernel sends the SIGCONT when the timer expires, stopped or not: no
  // thread of this process can (SIGSTOP stops them all), and a child process
  // that did showed up beside the worker under its name (`cluster down`
  // counted it as a worker started by hand).
  sigevent wake{};
  wake.sigev_notify = SIGEV_SIGNAL;
  wake.sigev_signo = SIGCONT;
  timer_t timer;
  if (timer_create(CLOCK_MONOTONIC, &wake, &timer) != 0) {
    spdlog::error("pause_worker: timer_create failed; not frozen");
    return;
  }
  // kill() may return before the stop takes this thread, so it waits for the
  // SIGCONT itself: the timer's, or an earlier one (`cluster down` sends one
  // with its SIGTERM, and the worker then stops at once).
  continued = false;
  struct sigaction on_continue {}, before {};
  on_continue.sa_handler = [](int) { continued = true; };
  on_continue.sa_flags = SA_RESTART;  // the other threads' calls go on as with no handler, where they can
  sigaction(SIGCONT, &on_continue, &before);
  itimerspec after{};
  after.it_value = {static_cast<time_t>(fault.pause_s), static_cast<long>(std::fmod(fault.pause_s, 1.0) * 1e9)};
  if (after.it_value.tv_sec == 0 && after.it_value.tv_nsec == 0) after.it_value.tv_nsec = 1;  // 0 would disarm it
  const auto start = std::chrono::steady_clock::now();
  if (timer_settime(timer, 0, &after, nullptr) == 0) {
    kill(getpid(), SIGSTOP);
    const timespec poll{0, 10'000'000};
    while (!continued) nanosleep(&poll, nullptr);
  } else {
    spdlog::error("pause_worker: timer_settime failed; not frozen");
  }
  timer_delete(timer);
  sigaction(SIGCONT, &before, nullptr);
  spdlog::warn("fault on purpose over: frozen for {:.1f} s of the {} s asked, going on",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), fault.pause_s);
}

}  // namespace tpuemu
