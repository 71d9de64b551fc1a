// A chunk of tensor data on its way over one directed link.
#pragma once

#include <cstdint>
#include <vector>

namespace tpuemu {

struct FrameHeader {
  uint64_t job = 0;
  int32_t src_chip = 0;
  int32_t dst_chip = 0;
  uint64_t tag = 0;
  double emu_arrival = 0;   // emulated time the data is usable at the receiver
  uint64_t emu_bytes = 0;   // bytes charged on the emulated clock (emulated dtype)
  int64_t latency_ns = 0;   // paced wall latency the receiver adds on receipt
};

struct Frame {
  FrameHeader header;
  std::vector<float> payload;
};

}  // namespace tpuemu
