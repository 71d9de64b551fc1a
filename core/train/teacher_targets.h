// The targets of the mean squared error, made once per host: the teacher's
// output on a step's batch rows. A batch shard's tensor shards all need the
// same rows (each takes its block of columns); each making them ran the
// teacher's forward pass, which the model does not count, once per tensor
// shard: with a 4-way tensor split the host spent more time on the teacher
// than on the model. The rows are the same whoever makes them (the teacher,
// the tokens and ForwardPass are), so sharing them moves no bit.
#pragma once

#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/train/config.h"
#include "core/train/model.h"

namespace tpuemu {

class TeacherTargets {
 public:
  using Rows = std::shared_ptr<const std::vector<float>>;

  TeacherTargets(const TrainConfig& config, std::shared_ptr<const ModelWeights> teacher);

  // Rows [first, first + count) of the batch of `step` through the teacher
  // (count x D, row-major). The first of the `takers` chips asking for them
  // makes them; the others wait for them and share them. Forgotten once
  // `takers` chips have taken them (a chip asking later makes them again).
  Rows Take(int step, int64_t first, int64_t count, int takers);

  // Rows made and not yet forgotten (tests).
  size_t held() const;

 private:
  const TrainConfig config_;
  const std::shared_ptr<const ModelWeights> teacher_;
  struct Entry {
    std::shared_future<Rows> rows;
    int taken = 0;
  };
  mutable std::mutex mu_;
  std::map<std::pair<int, int64_t>, Entry> entries_;  // by (step, first row)
};

}  // namespace tpuemu
