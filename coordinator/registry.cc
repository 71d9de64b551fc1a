#include "coordinator/registry.h"

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace tpuemu {
namespace {

std::string PlaceSource(const PlaceRequest& request) {
  return request.place_source.empty() ? "--slice/--host" : request.place_source;
}

}  // namespace

Registry::Registry(const Topology& topo, const PodConfig& pod, absl::Duration heartbeat_timeout,
                   ClientFactory factory)
    : topo_(topo), pod_(pod), heartbeat_timeout_(heartbeat_timeout), factory_(std::move(factory)) {
  configure_thread_ = std::thread([this] { ConfigureLoop(); });
  watch_thread_ = std::thread([this] { WatchLoop(); });
}

Registry::~Registry() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  configure_thread_.join();
  watch_thread_.join();
}

absl::StatusOr<GrantedPlace> Registry::RegisterWorker(const PlaceRequest& req) {
  const std::string who = absl::StrCat("the worker at ", req.address, " (place from ", PlaceSource(req), ")");
  if (req.address.empty()) return absl::InvalidArgumentError("register: the worker gave no address to reach it");
  if (req.num_slices != 0 && req.num_slices != topo_.slices()) {
    return absl::InvalidArgumentError(absl::StrCat("MEGASCALE_NUM_SLICES=", req.num_slices, " of ", who,
                                                   ": this pod (", topo_.Describe(), ") has ", topo_.slices(),
                                                   " slice(s)"));
  }
  if (req.slice < -1 || req.slice >= topo_.slices()) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": slice ", req.slice, " is outside the pod ",
                                                   topo_.Describe(), ", which has slices 0 to ", topo_.slices() - 1));
  }
  if (req.host < -1 || req.host >= topo_.hosts_per_slice()) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": host ", req.host, " is outside its slice: each slice of ",
                                                   topo_.Describe(), " has hosts 0 to ",
                                                   topo_.hosts_per_slice() - 1));
  }
  if (req.slice < 0 && req.host >= 0) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": host ", req.host, " given without its slice"));
  }
  // A place whose holder still heartbeats is given to another worker only if
  // that holder is gone now: a worker restarted on a new address, or a
  // compose container recreated, must not wait for its dead predecessor's
  // heartbeats to lapse. Gone, as liveness judges it: its connection reset
  // or closed, or no answer while its heartbeats are already half a timeout
  // late. One that registered a moment ago and is slow to answer (a new
  // channel's TLS handshake on a busy host) keeps its place.
  const bool claimed = req.host >= 0;
  std::set<int> unanswered;
  struct Holder {
    int global;
    std::shared_ptr<WorkerInterface> client;
    bool late;  // heartbeats half a timeout late
  };
  for (bool holders_asked = false;; holders_asked = true) {
    std::vector<Holder> holders;
    auto late = [&](const Worker& w) { return w.live.SinceHeartbeat(awake_.Now()) >= heartbeat_timeout_ / 2; };
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (claimed) {
        const int global = req.slice * topo_.hosts_per_slice() + req.host;
        auto it = workers_.find(global);
        if (it == workers_.end() || it->second.address == req.address || !AliveLocked(it->second) ||
            unanswered.count(global) > 0) {
          return TakePlaceLocked(global, req);
        }
        if (holders_asked) {
          return absl::AlreadyExistsError(absl::StrCat(
              who, " claims slice ", req.slice, " host ", req.host, ", which the live worker at ",
              it->second.address, " holds (place from ", it->second.place_source,
              "); give each worker its own place (see `tpuemu-worker --help`) or stop the other one"));
        }
        holders.push_back({global, it->second.client, late(it->second)});
      } else {
        auto place = AssignPlaceLocked(req.address, req.slice, unanswered);
        if (place.ok()) return TakePlaceLocked(*place, req);
        if (holders_asked) return absl::Status(place.status().code(), absl::StrCat(who, ": ", place.status().message()));
        for (const auto& [g, w] : workers_) {
          if (req.slice < 0 || topo_.SliceOfHost(g) == req.slice) holders.push_back({g, w.client, late(w)});
        }
      }
    }
    for (const Holder& h : holders) {
      const absl::Status answer = h.client->Status(absl::Seconds(1)).status();
      if (absl::IsUnavailable(answer) || (!answer.ok() && h.late)) unanswered.insert(h.global);
    }
  }
}

absl::StatusOr<int> Registry::AssignPlaceLocked(const std::string& address, int slice,
                                                const std::set<int>& unanswered) const {
  const int first = slice < 0 ? 0 : slice * topo_.hosts_per_slice();
  const int last = slice < 0 ? topo_.num_hosts() : first + topo_.hosts_per_slice();
  // The same worker back keeps its place; else the first place nobody holds;
  // else the first whose holder stopped heartbeating or did not answer.
  for (int g = first; g < last; ++g) {
    auto it = workers_.find(g);
    if (it != workers_.end() && it->second.address == address) return g;
  }
  for (int g = first; g < last; ++g) {
    if (workers_.count(g) == 0) return g;
  }
  for (int g = first; g < last; ++g) {
    if (!AliveLocked(workers_.at(g)) || unanswered.count(g) > 0) return g;
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "no free place: all ", last - first, " hosts of ", slice < 0 ? "the pod " : absl::StrCat("slice ", slice, " of "),
      topo_.Describe(), " are held by live workers; scale the workers to ", topo_.num_hosts(),
      " or start a pod with a bigger topology"));
}

GrantedPlace Registry::TakePlaceLocked(int global, const PlaceRequest& req) {
  Worker& w = workers_[global];
  if (!w.address.empty() && w.address != req.address) {
    spdlog::info("host {} re-registered: {} replaces {}", global, req.address, w.address);
  }
  w.host = global;
  w.slice = topo_.SliceOfHost(global);
  w.address = req.address;
  w.live.Reset(awake_.Now());
  w.incarnation = next_incarnation_++;
  w.client = factory_(req.address);
  w.place_source = PlaceSource(req);
  w.machine = req.machine;
  w.resident_bytes = 0;  // a new process: not said until its first heartbeat
  ++generation_;
  cv_.notify_all();
  const int host = global % topo_.hosts_per_slice();
  spdlog::info("worker registered: slice {} host {} (global {}) at {}; place from {}", w.slice, host, global,
               w.address, w.place_source);
  return GrantedPlace{global, w.slice, host, w.incarnation, heartbeat_timeout_};
}

absl::Status Registry::Heartbeat(int global_host, uint64_t incarnation, uint64_t resident_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = workers_.find(global_host);
  if (it == workers_.end()) {
    return absl::NotFoundError(absl::StrCat("host ", global_host, " is not registered; register first"));
  }
  if (it->second.incarnation != incarnation) {
    spdlog::warn("refused a stale heartbeat for host {} (incarnation {}; the worker at {} holds it now)", global_host,
                 incarnation, it->second.address);
    return absl::FailedPreconditionError(absl::StrCat("host ", global_host, " is now held by the worker at ",
                                                      it->second.address, "; this registration was replaced"));
  }
  it->second.live.Heartbeat(awake_.Now());
  it->second.resident_bytes = resident_bytes;
  return absl::OkStatus();
}

std::vector<RegisteredWorker> Registry::Workers() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RegisteredWorker> out;
  const absl::Time now = awake_.Now();
  for (const auto& [host, w] : workers_) {
    out.push_back({host, w.slice, w.address, w.incarnation, w.client, w.live.SinceHeartbeat(now), AliveLocked(w),
                   w.live.Slow(now, heartbeat_timeout_),
                   // A lost worker's last figure says nothing of it now.
                   AliveLocked(w) ? w.resident_bytes : 0});
  }
  return out;
}

bool Registry::Holds(int host, uint64_t incarnation) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = workers_.find(host);
  return it != workers_.end() && it->second.incarnation == incarnation;
}

bool Registry::Configured() const {
  std::lock_guard<std::mutex> lock(mu_);
  return configured_generation_ >= 0;
}

bool Registry::HostsReady(const std::vector<int>& hosts) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (configured_generation_ != generation_) return false;
  for (int host : hosts) {
    auto it = workers_.find(host);
    if (it == workers_.end() || !AliveLocked(it->second)) return false;
  }
  return true;
}

bool Registry::Ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (static_cast<int>(workers_.size()) != topo_.num_hosts()) return false;
  for (const auto& [_, w] : workers_) {
    if (!AliveLocked(w)) return false;
  }
  return configured_generation_ == generation_;
}

std::optional<std::string> Registry::FirstLost(const std::vector<int>& hosts) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (int host : hosts) {
    auto it = workers_.find(host);
    if (it != workers_.end() && !AliveLocked(it->second)) {
      return absl::StrCat(WorkerNameLocked(host), " was lost: ", LostReasonLocked(it->second));
    }
  }
  return std::nullopt;
}

void Registry::MarkLost(int host, const std::string& because) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = workers_.find(host);
  if (it != workers_.end()) it->second.live.MarkLost(because);
}

std::string Registry::WorkerName(int host) const {
  std::lock_guard<std::mutex> lock(mu_);
  return WorkerNameLocked(host);
}

bool Registry::AliveLocked(const Worker& w) const { return w.live.Alive(awake_.Now(), heartbeat_timeout_); }

std::string Registry::LostReasonLocked(const Worker& w) const {
  return w.live.LostReason(awake_.Now(), heartbeat_timeout_);
}

void Registry::WatchLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    if (stop_) return;
    const absl::Time now = awake_.Now();
    for (auto& [host, w] : workers_) {
      // A dropped connection is asked about at once: a process that exited
      // refuses the new one, and is lost within milliseconds.
      const bool dropped = w.client->ConnectionDropped();
      const bool late = w.live.NeedsProbe(now, heartbeat_timeout_);
      if (!dropped && !late) continue;
      if (probes_.Start(host, w.incarnation, w.client, Liveness::ProbeDeadline(heartbeat_timeout_))) {
        w.live.ProbeStarted(now, Liveness::ProbeDeadline(heartbeat_timeout_));
      }
    }
  }
}

void Registry::Probed(int host, uint64_t incarnation, const absl::Status& answer, absl::Duration waited) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = workers_.find(host);
  if (it == workers_.end() || it->second.incarnation != incarnation) return;  // the place changed hands meanwhile
  Worker& w = it->second;
  const absl::Time now = awake_.Now();
  const bool was_alive = w.live.Alive(now, heartbeat_timeout_);
  w.live.Probed(now, answer, waited);
  if (!answer.ok() && was_alive) {  // once, not at every question to a worker still gone
    spdlog::warn("{} did not answer a status call: {}", WorkerNameLocked(host), answer.ToString());
  } else if (w.live.BecameSlow(now, heartbeat_timeout_)) {
    spdlog::warn("{} is slow, not lost: no heartbeat for {} (the limit is {}), but it answers",
                 WorkerNameLocked(host), absl::FormatDuration(absl::Trunc(w.live.SinceHeartbeat(now),
                                                                          absl::Milliseconds(100))),
                 absl::FormatDuration(heartbeat_timeout_));
  }
}

std::string Registry::WorkerNameLocked(int host) const {
  auto it = workers_.find(host);
  return absl::StrCat("worker host ", host, " (slice ", topo_.SliceOfHost(host), ", ",
                      it == workers_.end() ? "unregistered" : it->second.address, ")");
}

void Registry::ConfigureLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(200));
    if (stop_) return;
    if (static_cast<int>(workers_.size()) != topo_.num_hosts() || configured_generation_ == generation_) continue;
    // Everyone is here (again): tell every worker where its peers are.
    PodConfig config = pod_;
    std::vector<std::tuple<int, uint64_t, std::shared_ptr<WorkerInterface>>> holders;
    for (const auto& [host, w] : workers_) {
      config.host_addresses[host] = w.address;
      if (!w.machine.empty()) config.host_machines[host] = w.machine;
      holders.emplace_back(host, w.incarnation, w.client);
    }
    const int64_t generation = generation_;
    lock.unlock();
    absl::Status all = absl::OkStatus();
    for (auto& [host, incarnation, client] : holders) {
      absl::Status s = client->Configure(incarnation, config);
      if (!s.ok()) {
        spdlog::warn("configuring host {} failed: {}", host, s.ToString());
        all = s;
      }
    }
    lock.lock();
    if (all.ok()) {
      configured_generation_ = generation;
      spdlog::info("pod ready: {}", topo_.Describe());
    }
  }
}

}  // namespace tpuemu
