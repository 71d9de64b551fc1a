// Ctrl-C (SIGINT) or SIGTERM while a command waits on the pod: the action the
// command set happens first (its own benchmark job cancelled, or a word on
// how to follow a job that keeps running), then the CLI exits 128 + the
// signal. One thread of its own takes the signals, so that the action may
// call the pod; without an action the CLI exits at once, as before.
#pragma once

#include <functional>

namespace tpuemu {

// In main, before any thread starts: the signals are blocked in every thread
// but the one that waits for them.
void CatchInterrupts();

// The action on interrupt while this lives (the last one made wins).
class OnInterrupt {
 public:
  explicit OnInterrupt(std::function<void()> action);
  ~OnInterrupt();
  OnInterrupt(const OnInterrupt&) = delete;
  OnInterrupt& operator=(const OnInterrupt&) = delete;

 private:
  std::function<void()> previous_;
};

// Once a signal is being handled, does not return: the handling thread ends
// the process with 128 + the signal. The main thread calls it before it
// reports an error or exits, so that a job its action cancelled is not
// reported as failed, nor the process's status taken from under the action.
void AwaitInterruptExit();

// In a fork()ed child before exec: the signals as a new process has them.
void UnblockInterruptsInChild();

}  // namespace tpuemu
