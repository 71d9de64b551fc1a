// A worker gives memory back only once it has had no job for a while, and
// then twice (the second time for what its peers free when they close their
// links to it): jobs that follow each other keep the heap warm.
#include "worker/idle_release.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace tpuemu {
namespace {

using std::chrono::milliseconds;

class IdleReleaseTest : public ::testing::Test {
 protected:
  std::atomic<int> releases{0};
  IdleRelease idle{[this] { ++releases; }, milliseconds(500), milliseconds(500)};

  // Waits (5 s at most: a loaded machine may run the thread late) for the
  // count to reach `n`.
  int AwaitReleases(int n) {
    for (int i = 0; i < 500 && releases < n; ++i) std::this_thread::sleep_for(milliseconds(10));
    return releases;
  }
};

TEST_F(IdleReleaseTest, NothingHeldNothingReleased) {
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_EQ(releases, 0);
}

TEST_F(IdleReleaseTest, ReleasesTheDelayAfterTheLastHoldEndsAndOnceMore) {
  auto hold = idle.Hold();
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_EQ(releases, 0) << "released while a job was held";
  hold.reset();
  const auto ended = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(releases, 0) << "released before the delay";
  EXPECT_EQ(AwaitReleases(1), 1);
  EXPECT_EQ(AwaitReleases(2), 2);
  EXPECT_GE(std::chrono::steady_clock::now() - ended, milliseconds(1000)) << "the second release came early";
  std::this_thread::sleep_for(milliseconds(700));
  EXPECT_EQ(releases, 2) << "released again with nothing held since";
}

TEST_F(IdleReleaseTest, AJobBetweenTheTwoReleasesStartsOver) {
  idle.Hold().reset();
  EXPECT_EQ(AwaitReleases(1), 1);
  auto hold = idle.Hold();
  std::this_thread::sleep_for(milliseconds(700));
  EXPECT_EQ(releases, 1) << "released while a job was held";
  hold.reset();
  EXPECT_EQ(AwaitReleases(3), 3);
}

TEST_F(IdleReleaseTest, ExtrasRunAtEachReleaseWhileTheirHandleLives) {
  std::atomic<int> extras{0};
  auto handle = idle.AlsoRelease([&] { ++extras; });
  idle.Hold().reset();
  EXPECT_EQ(AwaitReleases(2), 2);
  EXPECT_EQ(extras, 2);
  handle.reset();
  idle.Hold().reset();
  EXPECT_EQ(AwaitReleases(4), 4);
  EXPECT_EQ(extras, 2) << "an extra ran after its handle was dropped";
}

TEST_F(IdleReleaseTest, AJobWithinTheDelayKeepsTheMemory) {
  // Back-to-back jobs, each shorter than the delay, with gaps shorter than
  // it: nothing is released until the last one has ended for the delay.
  for (int job = 0; job < 6; ++job) {
    auto hold = idle.Hold();
    std::this_thread::sleep_for(milliseconds(60));
    hold.reset();
    std::this_thread::sleep_for(milliseconds(60));
  }
  EXPECT_EQ(releases, 0);
  EXPECT_EQ(AwaitReleases(1), 1);
}

TEST(IdleReleaseDelayTest, TheSecondReleaseComesItsOwnDelayAfterTheFirst) {
  std::atomic<int> releases{0};
  std::chrono::steady_clock::time_point at[2];
  IdleRelease idle{[&] {
                     at[releases.load()] = std::chrono::steady_clock::now();
                     ++releases;
                   },
                   milliseconds(100), milliseconds(900)};
  idle.Hold().reset();
  for (int i = 0; i < 500 && releases < 2; ++i) std::this_thread::sleep_for(milliseconds(10));
  ASSERT_EQ(releases, 2);
  EXPECT_GE(at[1] - at[0], milliseconds(900));
}

TEST(IdleReleaseDelayTest, ANewDelayAppliesToAWaitUnderWay) {
  // A worker sets its delay (--keep-memory-for) once it has read its flags.
  std::atomic<int> releases{0};
  IdleRelease idle{[&] { ++releases; }, std::chrono::hours(1), milliseconds(100)};
  idle.Hold().reset();
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(releases, 0);
  const auto shortened = std::chrono::steady_clock::now();
  idle.set_delay(milliseconds(300));
  for (int i = 0; i < 500 && releases < 2; ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_EQ(releases, 2);
  EXPECT_LT(std::chrono::steady_clock::now() - shortened, milliseconds(3000));
  idle.set_delay(std::chrono::hours(1));
  idle.Hold().reset();
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_EQ(releases, 2) << "released within the hour now set";
}

TEST_F(IdleReleaseTest, TwoJobsAtOnceReleaseWhenBothHaveEnded) {
  auto first = idle.Hold();
  auto second = idle.Hold();
  first.reset();
  std::this_thread::sleep_for(milliseconds(400));
  EXPECT_EQ(releases, 0);
  second.reset();
  EXPECT_EQ(AwaitReleases(1), 1);
}

}  // namespace
}  // namespace tpuemu
