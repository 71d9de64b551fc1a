#include "coordinator/probes.h"

namespace tpuemu {

Probes::~Probes() {
  std::map<int, std::unique_ptr<Probe>> probes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    probes.swap(probes_);
  }
  for (auto& [_, p] : probes) p->thread.join();
}

void Probes::JoinFinishedLocked() {
  for (auto it = probes_.begin(); it != probes_.end();) {
    if (it->second->done) {
      it->second->thread.join();  // it has returned, or is about to
      it = probes_.erase(it);
    } else {
      ++it;
    }
  }
}

bool Probes::Start(int host, uint64_t incarnation, std::shared_ptr<WorkerInterface> worker, absl::Duration deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  JoinFinishedLocked();
  if (probes_.count(host) > 0) return false;
  auto probe = std::make_unique<Probe>();
  Probe* p = probe.get();
  p->thread = std::thread([this, p, host, incarnation, worker = std::move(worker), deadline] {
    const absl::Time start = absl::Now();
    const absl::Status answer = worker->Status(deadline).status();
    done_(host, incarnation, answer, absl::Now() - start);
    std::lock_guard<std::mutex> lock(mu_);
    p->done = true;
  });
  probes_[host] = std::move(probe);
  return true;
}

}  // namespace tpuemu
