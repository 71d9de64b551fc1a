// The permute (pipeline sends) over the in-memory pod: the block arrives
// whole, in chunks, at ready + V / W + T_hop on the emulated clock (the
// chunks queue on the link, the latency is paid once at the end), the link
// counts exactly V emulated bytes, and bf16 on the wire rounds each value.
#include "core/train/permute.h"

#include <thread>

#include "core/job/inprocess_pod.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

LocalTensor Ramp(int64_t rows, int64_t cols) {
  LocalTensor t = LocalTensor::Allocate({rows, cols});
  for (int64_t i = 0; i < t.elements(); ++i) t.data[i] = 1.0f + static_cast<float>(i) / 3.0f;
  return t;
}

TEST(PermuteTest, ABlockArrivesWholeAtReadyPlusTransferPlusOneHop) {
  auto topo = Topology::Create({"v5p:4", 1, 4, "auto"});
  ASSERT_TRUE(topo.ok());
  InProcessPod pod(*topo, 0);
  const LocalTensor sent = Ramp(768, 1024);  // 3 MiB of floats: three wire chunks
  const int dtype = 2;                       // charged as bf16
  const double ready = 5e-6;
  RunOptions options;
  options.job = 7;
  pod.network().mailbox().OpenJob(options.job, 64 << 20);  // no HostJob here to open it
  std::vector<TraceEvent> trace;
  options.trace = &trace;
  LinkClocks links;
  LocalTensor got = LocalTensor::Allocate(sent.shape);
  absl::StatusOr<double> received;
  std::thread receiver([&] { received = PermuteReceive(pod.network(), options, 1, 0, kPermuteTagBit | 5 << 24, got, dtype); });
  auto arrival = PermuteSend(pod.network(), links, options, 0, 1, Axis::kX, +1, kPermuteTagBit | 5 << 24, sent, dtype,
                             ready);
  receiver.join();
  ASSERT_TRUE(arrival.ok()) << arrival.status();
  ASSERT_TRUE(received.ok()) << received.status();
  const LinkParams link = topo->Link(Axis::kX);
  const double bytes = static_cast<double>(sent.elements()) * dtype;
  EXPECT_NEAR(*arrival, ready + bytes / link.bw_dir + link.latency, 1e-15);
  EXPECT_DOUBLE_EQ(*received, *arrival);
  EXPECT_DOUBLE_EQ(links.at({static_cast<int>(Axis::kX), +1}).bytes_sent(), bytes);
  EXPECT_EQ(trace.size(), 3u);  // a span per chunk on the link's track
  for (int64_t i = 0; i < sent.elements(); ++i) ASSERT_EQ(got.data[i], sent.data[i]) << i;
}

TEST(PermuteTest, WrapsAroundAndRoundsToBf16OnTheWire) {
  auto topo = Topology::Create({"v5p:4", 1, 4, "auto"});  // x = 4 wraps: chip 3 -> 0 is one hop
  ASSERT_TRUE(topo.ok());
  InProcessPod pod(*topo, 0);
  const LocalTensor sent = Ramp(4, 5);
  RunOptions options;
  options.job = 8;
  pod.network().mailbox().OpenJob(options.job, 64 << 20);
  options.wire_bf16 = true;
  LinkClocks links;
  auto arrival = PermuteSend(pod.network(), links, options, 3, 0, Axis::kX, +1, kPermuteTagBit, sent, 2, 0);
  ASSERT_TRUE(arrival.ok()) << arrival.status();
  LocalTensor got = LocalTensor::Allocate(sent.shape);
  auto received = PermuteReceive(pod.network(), options, 0, 3, kPermuteTagBit, got, 2);
  ASSERT_TRUE(received.ok()) << received.status();
  for (int64_t i = 0; i < sent.elements(); ++i) EXPECT_EQ(got.data[i], RoundToBf16(sent.data[i])) << i;
  EXPECT_NE(got.data[1], sent.data[1]);  // 4/3 is not a bf16
}

TEST(PermuteTest, NoLinkIsAnError) {
  auto topo = Topology::Create({"v5p:2", 1, 2, "auto"});  // a line of 2: chip 1 has no x+ link
  ASSERT_TRUE(topo.ok());
  InProcessPod pod(*topo, 0);
  RunOptions options;
  LinkClocks links;
  auto arrival = PermuteSend(pod.network(), links, options, 1, 0, Axis::kX, +1, kPermuteTagBit, Ramp(1, 1), 2, 0);
  ASSERT_FALSE(arrival.ok());
  EXPECT_NE(std::string(arrival.status().message()).find("no x+ link"), std::string::npos) << arrival.status();
}

}  // namespace
}  // namespace tpuemu
