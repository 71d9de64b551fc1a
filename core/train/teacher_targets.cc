#include "core/train/teacher_targets.h"

namespace tpuemu {

TeacherTargets::TeacherTargets(const TrainConfig& config, std::shared_ptr<const ModelWeights> teacher)
    : config_(config), teacher_(std::move(teacher)) {}

TeacherTargets::Rows TeacherTargets::Take(int step, int64_t first, int64_t count, int takers) {
  std::promise<Rows> made;
  std::shared_future<Rows> rows;
  bool maker = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto key = std::make_pair(step, first);
    auto [it, fresh] = entries_.try_emplace(key);
    if (fresh) {
      it->second.rows = made.get_future().share();
      maker = true;
    }
    rows = it->second.rows;
    if (++it->second.taken >= takers) entries_.erase(it);
  }
  if (maker) {
    // Outside the lock: other rows are made at the same time. A failure
    // (out of memory) reaches the chips waiting for these rows too.
    try {
      std::vector<float> tokens = BatchTokens(config_, step, first, count);
      ForwardPass(config_, *teacher_, tokens);
      made.set_value(std::make_shared<const std::vector<float>>(std::move(tokens)));
    } catch (...) {
      made.set_exception(std::current_exception());
    }
  }
  return rows.get();
}

size_t TeacherTargets::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace tpuemu
