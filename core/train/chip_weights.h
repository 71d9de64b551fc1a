// A chip's shards of its stage's layers, Win [D/fsdp, F/tensor] and
// Wout [F/tensor, D/fsdp], with their optimizer state (Adam's moments, sharded
// as the weights are: ZeRO-3 over fsdp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

#include "core/tensor/local_tensor.h"
#include "core/train/config.h"

namespace tpuemu {

// Where the chip's shards sit in the full matrices.
struct WeightShard {
  int64_t d_offset = 0, d_rows = 0;  // rows of Win, columns of Wout
  int64_t f_offset = 0, f_cols = 0;  // columns of Win, rows of Wout
};

// What an update costs, charged as an elementwise op.
struct ElementwiseCost {
  double flops = 0, hbm_bytes = 0;
};

class ChipWeights {
 public:
  // The student's initial values of the owned layers' shards, zero moments.
  void Init(const TrainConfig& config, const std::vector<bool>& owned, const WeightShard& shard);

  bool owns(int l) const { return owned_[l]; }
  const LocalTensor& win(int l) const { return win_[l]; }
  const LocalTensor& wout(int l) const { return wout_[l]; }
  // One optimizer step on layer l's Win (`in`) or Wout with its reduced
  // gradient; `t` counts steps from 1.
  ElementwiseCost Update(int l, bool in, const LocalTensor& g, int t);
  // Sum of squares of the owned shards.
  double SquareSum() const;
  // The shards and moments, as a checkpoint keeps them (after Init), and
  // back: Restore takes what Save gave for the same config and shard.
  std::string Save() const;
  absl::Status Restore(const std::string& state);

 private:
  // Each owned layer's arrays (shards, then moments), in the one order Save
  // and Restore use: fn(first element, elements).
  // (Self: ChipWeights or const ChipWeights, for Restore or Save.)
  template <class Self, class Fn>
  static void ForEachArray(Self& self, Fn fn);

  TrainConfig c_;
  std::vector<bool> owned_;                                     // by layer
  std::vector<LocalTensor> win_, wout_;                         // empty where not owned
  std::vector<std::vector<float>> m_in_, v_in_, m_out_, v_out_;  // Adam's moments
};

}  // namespace tpuemu
