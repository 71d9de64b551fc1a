#include "client/interrupt.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>

namespace tpuemu {
namespace {

std::mutex mu;
std::function<void()> action;  // under mu
std::atomic<bool> interrupting{false};

sigset_t Interrupts() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

void CatchInterrupts() {
  const sigset_t set = Interrupts();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set] {
    int signal = 0;
    sigwait(&set, &signal);
    interrupting = true;
    std::function<void()> act;
    {
      std::lock_guard<std::mutex> lock(mu);
      act = action;
    }
    if (act) {
      if (isatty(STDERR_FILENO)) std::fputs("\r\033[K", stderr);  // over a progress line
      act();
    }
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(128 + signal);
  }).detach();
}

OnInterrupt::OnInterrupt(std::function<void()> act) {
  std::lock_guard<std::mutex> lock(mu);
  previous_ = std::exchange(action, std::move(act));
}

OnInterrupt::~OnInterrupt() {
  std::lock_guard<std::mutex> lock(mu);
  action = std::move(previous_);
}

void AwaitInterruptExit() {
  while (interrupting) pause();  // woken by nothing: the handling thread exits the process
}

void UnblockInterruptsInChild() {
  const sigset_t set = Interrupts();
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
}

}  // namespace tpuemu
