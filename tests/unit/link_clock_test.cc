#include "core/pod/link_clock.h"

#include <cmath>
#include <thread>

#include "gtest/gtest.h"

namespace tpuemu {
namespace {

TEST(EmuLinkTest, TransfersQueueBehindEachOtherAndAddLatency) {
  EmuLink link({1e9, 1e-6});
  auto a = link.Book(1000, 0);
  EXPECT_DOUBLE_EQ(a.start, 0);
  EXPECT_DOUBLE_EQ(a.end, 1e-6);
  EXPECT_DOUBLE_EQ(a.arrival, 2e-6);
  auto b = link.Book(1000, 0);  // ready at once, but the link is busy
  EXPECT_DOUBLE_EQ(b.start, 1e-6);
  EXPECT_DOUBLE_EQ(b.arrival, 3e-6);
  auto c = link.Book(1000, 10e-6);  // idle link: no saved-up credit
  EXPECT_DOUBLE_EQ(c.start, 10e-6);
  EXPECT_DOUBLE_EQ(c.end, 11e-6);
  EXPECT_DOUBLE_EQ(link.bytes_sent(), 3000);
}

TEST(WallPacerTest, UnpacedDoesNotWait) {
  WallPacer pacer({1e3, 1}, 0);
  EXPECT_FALSE(pacer.paced());
  const auto now = WallClock::now();
  EXPECT_EQ(pacer.Book(1e9, now), now);
}

TEST(WallPacerTest, PacedDeadlinesFollowTheScaledRateAndSaveNoCredit) {
  // 1e9 B/s emulated at scale 100 = 1e7 B/s wall: 1e5 bytes take 10 ms.
  WallPacer pacer({1e9, 1e-6}, 100);
  const auto t0 = WallClock::now();
  const auto d1 = pacer.Book(1e5, t0);
  const auto d2 = pacer.Book(1e5, t0);  // queued behind the first
  EXPECT_NEAR(std::chrono::duration<double>(d1 - t0).count(), 0.010, 1e-6);
  EXPECT_NEAR(std::chrono::duration<double>(d2 - t0).count(), 0.020, 1e-6);
  EXPECT_NEAR(std::chrono::duration<double>(pacer.latency()).count(), 100e-6, 1e-8);
  std::this_thread::sleep_until(d2 + std::chrono::milliseconds(30));
  const auto t1 = WallClock::now();
  const auto d3 = pacer.Book(1e5, t1);  // the idle 30 ms bought nothing
  EXPECT_NEAR(std::chrono::duration<double>(d3 - t1).count(), 0.010, 1e-6);
}

TEST(RooflineTest, TakesTheSlowerOfComputeAndMemory) {
  ChipProfile chip;
  chip.flops_bf16 = 1e12;
  chip.hbm_bw = 1e9;
  EXPECT_DOUBLE_EQ(RooflineSeconds(chip, 1e12, 1), 1.0);
  EXPECT_DOUBLE_EQ(RooflineSeconds(chip, 1, 2e9), 2.0);
}

// A long emulated step at a large --time-scale is paced, not wrapped past
// int64 nanoseconds into nothing (4e9 s at 1e9 was about -1.4e9 s).
TEST(WallPacerTest, StretchesSaturateAtACenturyInsteadOfWrapping) {
  const auto century = std::chrono::duration_cast<WallClock::duration>(std::chrono::duration<double>(3155760000.0));
  EXPECT_EQ(WallSeconds(4e18), century);
  EXPECT_EQ(WallSeconds(1e9 * 10), century);
  EXPECT_EQ(WallSeconds(-1), WallClock::duration::zero());
  EXPECT_EQ(WallSeconds(std::nan("")), WallClock::duration::zero());
  EXPECT_EQ(WallSeconds(1.5), std::chrono::milliseconds(1500));
  WallPacer paced(LinkParams{1e9, 1e-6}, 1e9);
  EXPECT_GT(paced.Stretched(10).count(), 0);
}

}  // namespace
}  // namespace tpuemu
