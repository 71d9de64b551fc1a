#include "services/peer_queue.h"

#include <pthread.h>

namespace tpuemu {

PeerQueue::PeerQueue(std::unique_ptr<grpc::ServerCompletionQueue> cq) : cq_(std::move(cq)) {
  thread_ = std::thread([cq = cq_.get()] {
    pthread_setname_np(pthread_self(), "peer-queue");
    void* tag = nullptr;
    bool ok = false;
    while (cq->Next(&tag, &ok)) static_cast<Tag*>(tag)->Done(ok);
  });
}

PeerQueue::~PeerQueue() {
  cq_->Shutdown();
  thread_.join();
}

}  // namespace tpuemu
