#include "core/train/teacher_targets.h"

#include <algorithm>
#include <cstring>

namespace tpuemu {

TeacherTargets::TeacherTargets(const TrainConfig& config, std::shared_ptr<const ModelWeights> teacher)
    : config_(config), teacher_(std::move(teacher)) {}

int64_t TeacherTargets::Unit() const { return config_.attention() ? config_.seq_len : 1; }

void TeacherTargets::MakePart(int step, int64_t first, int64_t count, int part, int parts,
                              std::vector<float>& rows) const {
  const int64_t units = count / Unit();
  const int64_t begin = units * part / parts * Unit();
  const int64_t end = part + 1 == parts ? count : units * (part + 1) / parts * Unit();
  std::vector<float> x = BatchTokens(config_, step, first + begin, end - begin);
  ForwardPass(config_, *teacher_, x);
  std::memcpy(rows.data() + begin * config_.emb_dim, x.data(), x.size() * sizeof(float));
}

TeacherTargets::Rows TeacherTargets::Take(int step, int64_t first, int64_t count, int takers) {
  const auto key = std::make_pair(step, first);
  std::unique_lock<std::mutex> lock(mu_);
  std::shared_ptr<Entry>& slot = entries_[key];
  if (!slot) {
    slot = std::make_shared<Entry>();
    slot->rows = std::make_shared<std::vector<float>>(count * config_.emb_dim);
    slot->parts = static_cast<int>(std::clamp<int64_t>(count / Unit(), 1, std::max(takers, 1)));
  }
  const std::shared_ptr<Entry> e = slot;
  while (e->begun < e->parts) {
    const int part = e->begun++;
    lock.unlock();
    std::exception_ptr error;
    try {
      MakePart(step, first, count, part, e->parts, *e->rows);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error && !e->error) e->error = error;
    ++e->made;
    part_made_.notify_all();
  }
  part_made_.wait(lock, [&] { return e->made == e->parts; });
  if (++e->taken == takers) {
    // Still this entry: an entry leaves the map only here, once, when its
    // last taker has it.
    entries_.erase(key);
  }
  if (e->error) std::rethrow_exception(e->error);
  return e->rows;
}

size_t TeacherTargets::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace tpuemu
