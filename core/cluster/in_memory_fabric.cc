#include "core/cluster/in_memory_fabric.h"

#include "absl/strings/str_cat.h"

namespace tpuemu {

class InMemoryFabric::End : public HostFabric {
 public:
  End(InMemoryFabric* fabric, const Topology& topo, int host) : fabric_(fabric), topo_(topo), host_(host) {}
  ~End() override {
    std::lock_guard<std::mutex> lock(fabric_->mu_);
    // A newer configuration of the host may have taken its place already.
    auto it = fabric_->mailboxes_.find(host_);
    if (it != fabric_->mailboxes_.end() && it->second == local_) fabric_->mailboxes_.erase(it);
  }

  absl::Status Connect(Mailbox& local, const std::vector<int>&, const std::vector<int>&, absl::Duration) override {
    std::lock_guard<std::mutex> lock(fabric_->mu_);
    local_ = &local;
    fabric_->mailboxes_[host_] = local_;
    return absl::OkStatus();
  }

  absl::Status Deliver(Frame&& frame) override {
    // Routed by the pod's chip ids (a placed job's own ids are offset).
    return fabric_->Deliver(topo_.HostOf(frame.header.pod_dst_chip()), std::move(frame));
  }

 private:
  InMemoryFabric* fabric_;
  const Topology topo_;
  const int host_;
  Mailbox* local_ = nullptr;
};

FabricFactory InMemoryFabric::Factory() {
  return [this](const PodConfig&, const Topology& topo, int host) { return std::make_unique<End>(this, topo, host); };
}

absl::Status InMemoryFabric::Deliver(int host, Frame&& frame) {
  // Under the lock, so that a host's end does not go while a frame is put.
  std::lock_guard<std::mutex> lock(mu_);
  auto it = mailboxes_.find(host);
  if (it == mailboxes_.end()) {
    return absl::UnavailableError(absl::StrCat("host ", host, " has no end on the in-memory fabric (not configured)"));
  }
  it->second->Put(std::move(frame));
  return absl::OkStatus();
}

}  // namespace tpuemu
