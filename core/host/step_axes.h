// How a training step's figures are split, sized here because chip results
// (core/host/chip_result.h) carry them below the training code: by logical
// mesh axis (data, fsdp, tensor, pipeline; named in core/train/mesh.h) and by
// compute part (forward matmuls, backward matmuls, the rest).
#pragma once

namespace tpuemu {

inline constexpr int kMeshAxes = 4;
inline constexpr int kComputeParts = 3;

}  // namespace tpuemu
