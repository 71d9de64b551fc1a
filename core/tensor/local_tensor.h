// A chip's block of a sharded tensor, row-major in its local shape, and the
// data movements a sharded matmul makes on it locally: reassembling gathered
// blocks along a dimension, cutting one into blocks for a ReduceScatter,
// slicing. Values are deterministic in (seed, tensor, global index), so every
// chip makes its own shard and a reference makes exactly the same numbers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tpuemu {

struct LocalTensor {
  std::vector<int64_t> shape;
  // Shared because collectives lend ranges of it to frames in flight.
  std::shared_ptr<float[]> data;

  int64_t elements() const;
  // False for a shape-only tensor (a shape-only job's, values: none): every
  // operation on it makes a shape-only result and moves no values.
  bool has_values() const { return data != nullptr; }
  static LocalTensor Allocate(std::vector<int64_t> shape);  // uninitialised
  static LocalTensor ShapeOnly(std::vector<int64_t> shape);
  // Allocate, or ShapeOnly when `values` is false.
  static LocalTensor Make(std::vector<int64_t> shape, bool values);
};

// uniform: in [-1, 1), 24 random bits. int: integers in [-3, 3], for which
// every sum a matmul makes up to 2^20 terms is exact in fp32, whatever the order.
enum class ValueKind { kUniform, kSmallInt };
absl::StatusOr<ValueKind> ParseValueKind(const std::string& name);
std::string ValueKindName(ValueKind kind);

float TensorValue(ValueKind kind, uint64_t seed, int tensor, uint64_t global_index);

// The elements at the given global indices of every dimension.
LocalTensor GenerateBlock(ValueKind kind, uint64_t seed, int tensor, const std::vector<int64_t>& global_shape,
                          const std::vector<std::vector<int64_t>>& indices);

// n blocks of `block_shape`, one after another in `blocks`, joined along `dim`.
LocalTensor ConcatBlocks(const float* blocks, int n, const std::vector<int64_t>& block_shape, int dim);
// The inverse: t cut into n blocks along `dim`, written one after another.
void SplitBlocks(const LocalTensor& t, int n, int dim, float* out);
// Block `index` of n along `dim` (shape-only for a shape-only t).
LocalTensor SliceBlock(const LocalTensor& t, int dim, int n, int index);

}  // namespace tpuemu
