// A worker's standing with its coordinator: registers (retrying until the
// coordinator answers, as compose and Kubernetes start services in any
// order), then heartbeats on a thread of its own (and, over gRPC, a
// connection that carries only its registrations and heartbeats), paced by
// the pod's heartbeat timeout. When the coordinator comes
// back without knowing this worker (it restarted), the worker registers again
// for the place it held; when another process has taken its place, the
// session ends. It speaks to the coordinator through a Registrar: the gRPC
// one in a worker process.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "core/cluster/registrar.h"
#include "worker/worker_place.h"

namespace tpuemu {

class CoordinatorSession {
 public:
  // `on_place` runs after every successful registration with the global host
  // index and the incarnation the coordinator gave. `coordinator` names the
  // registrar's coordinator in logs.
  CoordinatorSession(std::unique_ptr<Registrar> registrar, const std::string& coordinator, const std::string& address,
                     const WorkerPlace& place, std::function<void(int global_host, uint64_t incarnation)> on_place);
  ~CoordinatorSession();

  // Registers, retrying while the coordinator is unreachable; returns an
  // error the coordinator gave (a refused place) or once Stop() is called.
  absl::Status Register();
  // Heartbeats until Stop(); re-registers when the coordinator forgot us.
  void StartHeartbeats();
  void Stop();

  bool registered() const { return registered_; }
  // Set when the session ended for good (place taken, refused): why.
  std::string ended() const;

 private:
  absl::Status RegisterOnce(const WorkerPlace& place, bool& retry);
  void HeartbeatLoop();
  bool SleepUnlessStopped(std::chrono::milliseconds d);

  const std::string coordinator_;
  const std::string address_;
  WorkerPlace place_;
  const std::function<void(int, uint64_t)> on_place_;
  const std::unique_ptr<Registrar> registrar_;

  std::atomic<bool> registered_{false};
  // Every 500 ms, or a sixth of the pod's heartbeat timeout if shorter.
  std::atomic<int64_t> heartbeat_every_ms_{500};
  int global_host_ = -1;
  uint64_t incarnation_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string ended_;
  std::thread heartbeats_;
};

}  // namespace tpuemu
