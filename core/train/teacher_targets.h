// The targets of the mean squared error, made once per host: the teacher's
// output on a step's batch rows. A batch shard's tensor shards all need the
// same rows (each takes its block of columns); each making them ran the
// teacher's forward pass, which the model does not count, once per tensor
// shard: with a 4-way tensor split the host spent more time on the teacher
// than on the model. Now the chips that need the rows make them together,
// each a part (whole sequences with attention), and share them. The rows
// are the same bits whoever makes which part: the teacher and the tokens are
// fixed, and the forward pass treats rows (sequences) independently, as the
// sharded strategies already rely on to equal one device.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
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
  // (count x D, row-major), for one of the `takers` chips that ask for them.
  // The rows come in up to `takers` parts: a chip makes parts nobody has
  // begun, then waits for the parts others are making (never for a chip that
  // has not asked yet). Forgotten once `takers` chips have them (a chip
  // asking later makes them again).
  Rows Take(int step, int64_t first, int64_t count, int takers);

  // Rows asked for and not yet forgotten (tests).
  size_t held() const;

 private:
  struct Entry {
    std::shared_ptr<std::vector<float>> rows;
    int parts = 0, begun = 0, made = 0, taken = 0;
    std::exception_ptr error;  // the first part that failed (out of memory)
  };
  // The rows a part is made of: whole sequences, as attention mixes a
  // sequence's rows; the last part takes any rows left over.
  int64_t Unit() const;
  // Makes part `part` of `parts` of the rows into `rows`.
  void MakePart(int step, int64_t first, int64_t count, int part, int parts, std::vector<float>& rows) const;

  const TrainConfig config_;
  const std::shared_ptr<const ModelWeights> teacher_;
  mutable std::mutex mu_;
  std::condition_variable part_made_;
  std::map<std::pair<int, int64_t>, std::shared_ptr<Entry>> entries_;  // by (step, first row)
};

}  // namespace tpuemu
