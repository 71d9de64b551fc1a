// The permute collective's two ends (DESIGN §4: "permute (pipeline
// sends)"): one chip's block goes to a neighbour over one directed link, in
// wire chunks, on both clocks. Pipeline stages use it for activations going
// forward and their gradients coming back.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "core/collective/executor.h"
#include "core/wire/host_network.h"
#include "core/tensor/local_tensor.h"

namespace tpuemu {

// Tags of permute chunks: the top bit set, so they never meet a collective's.
inline constexpr uint64_t kPermuteTagBit = uint64_t{1} << 63;

// Books `t` (emulated dtype `dtype_bytes` per element) on the chip's link
// along axis/dir from emulated time `ready` on, carrying `links` forward,
// and queues its chunks (shape-only ones for a shape-only t). Returns the emulated time its last chunk arrives.
// The sender does not wait: the transfer runs while the chip computes.
absl::StatusOr<double> PermuteSend(HostNetwork& net, LinkClocks& links, const RunOptions& options, int chip,
                                   int peer, Axis axis, int dir, uint64_t tag, const LocalTensor& t, int dtype_bytes,
                                   double ready);

// Receives into `t` (already shaped; shape-only for a shape-only run) a
// block PermuteSend sent with `tag`; returns the emulated time the last of
// it arrived.
absl::StatusOr<double> PermuteReceive(HostNetwork& net, const RunOptions& options, int chip, int peer, uint64_t tag,
                                      LocalTensor& t, int dtype_bytes);

}  // namespace tpuemu
