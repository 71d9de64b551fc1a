// Tells workers that a job is over, until each has heard it. A worker that
// was stopped (SIGSTOP) when its job ended hears it once it runs again, so
// that its chips stop at once rather than compute on and wait out their
// receive timeout; a place that changed hands meanwhile is not asked again
// (the new process never had the job). Sending never blocks the caller: the
// coordinator ends a job without waiting for a stuck worker.
#pragma once

#include <condition_variable>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/cluster/worker_interface.h"

namespace tpuemu {

class AbortDelivery {
 public:
  // Whether `incarnation` still holds place `host`.
  using StillHolds = std::function<bool(int host, uint64_t incarnation)>;
  explicit AbortDelivery(StillHolds still_holds) : still_holds_(std::move(still_holds)) {}
  // Stops retrying; aborts not yet heard are dropped.
  ~AbortDelivery();

  void Send(int host, uint64_t incarnation, std::shared_ptr<WorkerInterface> worker, uint64_t job,
            const std::string& why);

 private:
  struct Sender {
    std::thread thread;
    bool done = false;
  };
  void Deliver(int host, uint64_t incarnation, const std::shared_ptr<WorkerInterface>& worker, uint64_t job,
               const std::string& why, Sender* self);

  const StillHolds still_holds_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::list<Sender> senders_;  // nodes are stable: each thread marks its own done
};

}  // namespace tpuemu
