#include "core/base/cancellation.h"

namespace tpuemu {

Cancellation::Registration::~Registration() {
  if (owner_ == nullptr) return;
  std::lock_guard<std::mutex> lock(owner_->mu_);
  owner_->operations_.erase(id_);
}

void Cancellation::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_) return;
  cancelled_ = true;
  for (auto& [_, cancel] : operations_) cancel();
}

bool Cancellation::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

Cancellation::Registration Cancellation::OnCancel(std::function<void()> cancel) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cancelled_) cancel();
  const int id = next_id_++;
  operations_.emplace(id, std::move(cancel));
  return Registration(this, id);
}

}  // namespace tpuemu
