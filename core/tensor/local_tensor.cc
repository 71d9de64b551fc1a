#include "core/tensor/local_tensor.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/base/field.h"
#include "core/base/splitmix.h"

namespace tpuemu {
namespace {

// Sizes of the dimensions before `dim`, of `dim`, and after it.
struct Split3 {
  int64_t outer = 1, len = 1, inner = 1;
};

Split3 Around(const std::vector<int64_t>& shape, int dim) {
  Split3 s;
  for (int d = 0; d < dim; ++d) s.outer *= shape[d];
  s.len = shape[dim];
  for (size_t d = dim + 1; d < shape.size(); ++d) s.inner *= shape[d];
  return s;
}

}  // namespace

int64_t LocalTensor::elements() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

LocalTensor LocalTensor::Allocate(std::vector<int64_t> shape) {
  LocalTensor t;
  t.shape = std::move(shape);
  t.data.reset(new float[std::max<int64_t>(t.elements(), 1)]);
  return t;
}

LocalTensor LocalTensor::ShapeOnly(std::vector<int64_t> shape) {
  LocalTensor t;
  t.shape = std::move(shape);
  return t;
}

LocalTensor LocalTensor::Make(std::vector<int64_t> shape, bool values) {
  return values ? Allocate(std::move(shape)) : ShapeOnly(std::move(shape));
}

absl::StatusOr<ValueKind> ParseValueKind(const std::string& name) {
  if (name == "uniform") return ValueKind::kUniform;
  if (name == "int") return ValueKind::kSmallInt;
  return absl::InvalidArgumentError(absl::StrCat(Field("values"), " '", name, "': allowed: uniform, int"));
}

std::string ValueKindName(ValueKind kind) { return kind == ValueKind::kUniform ? "uniform" : "int"; }

float TensorValue(ValueKind kind, uint64_t seed, int tensor, uint64_t global_index) {
  const uint64_t r = SplitMix64(SplitMix64(seed * 4 + tensor) ^ global_index);
  if (kind == ValueKind::kSmallInt) return static_cast<float>(static_cast<int>(r % 7) - 3);
  return UnitFloat(r);
}

LocalTensor GenerateBlock(ValueKind kind, uint64_t seed, int tensor, const std::vector<int64_t>& global_shape,
                          const std::vector<std::vector<int64_t>>& indices) {
  std::vector<int64_t> shape;
  for (const auto& idx : indices) shape.push_back(static_cast<int64_t>(idx.size()));
  LocalTensor t = LocalTensor::Allocate(shape);
  const size_t rank = shape.size();
  std::vector<int64_t> at(rank, 0);
  for (int64_t i = 0; i < t.elements(); ++i) {
    uint64_t flat = 0;
    for (size_t d = 0; d < rank; ++d) flat = flat * global_shape[d] + indices[d][at[d]];
    t.data[i] = TensorValue(kind, seed, tensor, flat);
    for (int d = static_cast<int>(rank) - 1; d >= 0; --d) {
      if (++at[d] < shape[d]) break;
      at[d] = 0;
    }
  }
  return t;
}

LocalTensor ConcatBlocks(const float* blocks, int n, const std::vector<int64_t>& block_shape, int dim) {
  const Split3 s = Around(block_shape, dim);
  std::vector<int64_t> shape = block_shape;
  shape[dim] *= n;
  LocalTensor t = LocalTensor::Allocate(shape);
  const int64_t row = s.len * s.inner, block = s.outer * row;
  for (int g = 0; g < n; ++g) {
    for (int64_t o = 0; o < s.outer; ++o) {
      std::memcpy(&t.data[(o * n + g) * row], blocks + g * block + o * row, row * sizeof(float));
    }
  }
  return t;
}

void SplitBlocks(const LocalTensor& t, int n, int dim, float* out) {
  std::vector<int64_t> block_shape = t.shape;
  block_shape[dim] /= n;
  const Split3 s = Around(block_shape, dim);
  const int64_t row = s.len * s.inner, block = s.outer * row;
  for (int g = 0; g < n; ++g) {
    for (int64_t o = 0; o < s.outer; ++o) {
      std::memcpy(out + g * block + o * row, &t.data[(o * n + g) * row], row * sizeof(float));
    }
  }
}

LocalTensor SliceBlock(const LocalTensor& t, int dim, int n, int index) {
  std::vector<int64_t> shape = t.shape;
  shape[dim] /= n;
  if (!t.has_values()) return LocalTensor::ShapeOnly(shape);
  const Split3 s = Around(shape, dim);
  LocalTensor out = LocalTensor::Allocate(shape);
  const int64_t row = s.len * s.inner;
  for (int64_t o = 0; o < s.outer; ++o) {
    std::memcpy(&out.data[o * row], &t.data[(o * n + index) * row], row * sizeof(float));
  }
  return out;
}

}  // namespace tpuemu
