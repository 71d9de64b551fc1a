// Cancels operations in flight from another thread: a job's calls to its
// workers, so that the coordinator ends a job (a worker lost, a user's
// cancel) without waiting for a stopped worker's call to return.
#pragma once

#include <functional>
#include <map>
#include <mutex>

namespace tpuemu {

class Cancellation {
 public:
  // Runs `cancel` when Cancel() is called, at once if it was already, until
  // the registration is destroyed (which waits for a `cancel` running).
  class Registration {
   public:
    Registration(Cancellation* owner, int id) : owner_(owner), id_(id) {}
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;
    ~Registration();

   private:
    Cancellation* owner_;
    int id_;
  };

  // Cancels every registered operation and every one registered later.
  void Cancel();
  bool cancelled() const;
  [[nodiscard]] Registration OnCancel(std::function<void()> cancel);

 private:
  mutable std::mutex mu_;
  bool cancelled_ = false;
  int next_id_ = 0;
  std::map<int, std::function<void()>> operations_;
};

}  // namespace tpuemu
