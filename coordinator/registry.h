// The coordinator's registry of workers: who holds each place of the pod (the
// registration, its address and a client for it), whether they live
// (heartbeats; when those are late, the worker's connection: liveness.h),
// and the pod's
// configuration: once every place is held, and again whenever one changes
// hands, every worker is told where its peers are.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/awake_clock.h"
#include "coordinator/liveness.h"
#include "coordinator/probes.h"
#include "core/cluster/registrar.h"
#include "core/cluster/worker_interface.h"
#include "core/pod/pod_config.h"
#include "core/pod/topology.h"

namespace tpuemu {

// A place's holder as the rest of the coordinator sees it.
struct RegisteredWorker {
  int host = 0;
  int slice = 0;
  std::string address;
  uint64_t incarnation = 0;
  std::shared_ptr<WorkerInterface> worker;
  absl::Duration since_heartbeat;
  bool alive = false;
  bool slow = false;  // alive, but its heartbeats are late (liveness.h)
  uint64_t resident_bytes = 0;  // as its last heartbeat said; 0: not said, or the worker is lost
};

class Registry {
 public:
  // A client for the worker at `address`: the worker contract over gRPC, or
  // the worker itself in one process.
  using ClientFactory = std::function<std::shared_ptr<WorkerInterface>(const std::string& address)>;

  // `pod` gives the topology and time scale workers are configured with;
  // `heartbeat_timeout` how long a worker may go without a heartbeat, or
  // an answer when asked (liveness.h).
  Registry(const Topology& topo, const PodConfig& pod, absl::Duration heartbeat_timeout, ClientFactory factory);
  ~Registry();

  // The registrar's calls (core/cluster/registrar.h) that concern places.
  absl::StatusOr<GrantedPlace> RegisterWorker(const PlaceRequest& request);
  absl::Status Heartbeat(int global_host, uint64_t incarnation, uint64_t resident_bytes);

  // Every place's holder, by host.
  std::vector<RegisteredWorker> Workers() const;
  // Whether `incarnation` still holds place `host`.
  bool Holds(int host, uint64_t incarnation) const;
  // Every place held by a live worker, all configured as the pod is now.
  bool Ready() const;
  // Whether the pod was configured once every place was held (since this
  // coordinator started): from then on jobs may queue.
  bool Configured() const;
  // Every one of `hosts` held by a live worker, configured as the pod is
  // now: a job on them may start, whatever the other places' workers do.
  bool HostsReady(const std::vector<int>& hosts) const;
  // "<worker> was lost: <why>" for the first holder of `hosts` counted
  // lost, if any.
  std::optional<std::string> FirstLost(const std::vector<int>& hosts) const;
  // Counts the holder of `host` lost now rather than once its heartbeats
  // lapse; its next heartbeat or a new registration clears it.
  void MarkLost(int host, const std::string& because);
  // "worker host 1 (slice 0, 10.0.0.2:4000)", for errors.
  std::string WorkerName(int host) const;

 private:
  struct Worker {
    int host = 0;
    int slice = 0;
    std::string address;
    std::shared_ptr<WorkerInterface> client;
    uint64_t incarnation = 0;  // of the registration that holds the place
    std::string place_source;  // where that worker found its place, for conflicts
    std::string machine;       // the machine it said it runs on
    Liveness live;
    uint64_t resident_bytes = 0;  // as its last heartbeat said
  };

  void ConfigureLoop();
  // Asks the workers whose heartbeats are late, or whose connection
  // dropped, whether they still answer (liveness.h).
  void WatchLoop();
  void Probed(int host, uint64_t incarnation, const absl::Status& answer, absl::Duration waited);
  // The place (global host) for a worker that asked to be assigned one.
  absl::StatusOr<int> AssignPlaceLocked(const std::string& address, int slice, const std::set<int>& unanswered) const;
  GrantedPlace TakePlaceLocked(int global, const PlaceRequest& request);
  bool AliveLocked(const Worker& w) const;
  // What the coordinator saw of a worker it counts as lost.
  std::string LostReasonLocked(const Worker& w) const;
  std::string WorkerNameLocked(int host) const;

  const Topology topo_;
  const PodConfig pod_;
  const absl::Duration heartbeat_timeout_;
  const ClientFactory factory_;

  mutable std::mutex mu_;
  // Every liveness time is read from it, under mu_ (WatchLoop reads it
  // every tenth of a second, so a longer gap is the coordinator's own).
  mutable AwakeClock awake_;
  std::condition_variable cv_;
  std::map<int, Worker> workers_;
  int64_t configured_generation_ = -1;  // registration generation the pod was configured for
  int64_t generation_ = 0;              // bumps on every (re-)registration
  // Registrations are numbered from a random start, so that a restarted
  // coordinator does not take an earlier process's heartbeats as current.
  uint64_t next_incarnation_ = absl::ToUnixNanos(absl::Now());
  bool stop_ = false;
  // After mu_ and workers_, which its callbacks use: destroyed (its probes
  // joined) before them.
  Probes probes_{[this](int host, uint64_t incarnation, const absl::Status& answer, absl::Duration waited) {
    Probed(host, incarnation, answer, waited);
  }};
  std::thread configure_thread_;
  std::thread watch_thread_;
};

}  // namespace tpuemu
