// A chip's shards of its stage's layers, Win [D/fsdp, F/tensor] (and, for a
// gated MLP, Wup of the same shape) and Wout [F/tensor, D/fsdp], with
// attention Wq, Wk, Wv [D/fsdp, width/tensor] and Wo [width/tensor, D/fsdp]
// (the tensor axis splits whole heads), with a vocabulary the embedding E
// [V/tensor, D/fsdp] (first layer) and projection Wv [D/fsdp, V/tensor] (last
// layer), all with their optimizer state (Adam's
// moments, sharded as the weights are: ZeRO-3 over fsdp).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

#include "core/tensor/local_tensor.h"
#include "core/train/config.h"
#include "core/train/model.h"

namespace tpuemu {

// Where the chip's shards sit in the full matrices: along D, rows
// [d_offset, d_offset + d_rows) of Win (columns of Wout); along each
// matrix's width, block `tensor_index` of `tensor_ways`.
struct WeightShard {
  int64_t d_offset = 0, d_rows = 0;
  int tensor_index = 0, tensor_ways = 1;
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
  const LocalTensor& weight(Matrix m, int l) const { return w_[static_cast<int>(m)][l]; }
  const LocalTensor& win(int l) const { return weight(Matrix::kIn, l); }
  const LocalTensor& wout(int l) const { return weight(Matrix::kOut, l); }
  // One optimizer step on layer l's matrix `m` with its reduced gradient;
  // `t` counts steps from 1.
  ElementwiseCost Update(int l, Matrix m, const LocalTensor& g, int t);
  // Sum of squares of the owned shards.
  double SquareSum() const;
  // The shards and moments, as a checkpoint keeps them (after Init), and
  // back: Restore takes what Save gave for the same config and shard.
  std::string Save() const;
  absl::Status Restore(const std::string& state);

 private:
  // Each owned layer's arrays (Win and Wout, their moments, then Wup and
  // its moments), in the one order Save and Restore use: fn(first element,
  // elements). (Self: ChipWeights or const ChipWeights, for Restore or Save.)
  template <class Self, class Fn>
  static void ForEachArray(Self& self, Fn fn);

  TrainConfig c_;
  std::vector<bool> owned_;  // by layer
  // By Matrix, then layer: shards (empty where not owned) and Adam's moments.
  std::array<std::vector<LocalTensor>, kMatrixKinds> w_;
  std::array<std::vector<std::vector<float>>, kMatrixKinds> m_, v_;
};

}  // namespace tpuemu
