// The mailbox wakes a chip only for the frame it waits for; these check that
// every waiter still gets its frame, whatever arrives first, and that abort and
// timeout still end a wait.
#include "core/mailbox.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

namespace tpuemu {
namespace {

using ::testing::HasSubstr;

Frame MakeFrame(uint64_t job, int src, int dst, uint64_t tag, float value) {
  Frame f;
  f.header.job = job;
  f.header.src_chip = src;
  f.header.dst_chip = dst;
  f.header.tag = tag;
  f.payload.assign(4, value);
  return f;
}

// Waits give up after kPatience; a waiter that was woken gets its frame long
// before (kPrompt), one that was not only when its wait times out.
constexpr absl::Duration kPatience = absl::Seconds(20);
constexpr auto kPrompt = std::chrono::seconds(5);

TEST(MailboxTest, AFrameThatArrivedFirstIsTakenAtOnce) {
  Mailbox box;
  box.Put(MakeFrame(1, 0, 1, 7, 3.0f));
  auto f = box.Take(1, 1, 0, 7, kPatience);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->payload[0], 3.0f);
  EXPECT_EQ(box.pending(), 0u);
}

TEST(MailboxTest, AWaiterGetsItsFrameAfterOtherLinksFramesArrive) {
  Mailbox box;
  const auto t0 = std::chrono::steady_clock::now();
  auto waiter = std::async(std::launch::async, [&] { return box.Take(1, 1, 0, 7, kPatience); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  box.Put(MakeFrame(1, 2, 1, 7, 1.0f));  // same tag, other source
  box.Put(MakeFrame(1, 0, 1, 8, 2.0f));  // same source, other tag
  box.Put(MakeFrame(2, 0, 1, 7, 4.0f));  // another job
  box.Put(MakeFrame(1, 0, 1, 7, 5.0f));  // the one
  auto f = waiter.get();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, kPrompt);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->payload[0], 5.0f);
  EXPECT_EQ(box.pending(), 3u);
}

TEST(MailboxTest, TwoWaitersOfOneChipEachGetTheirOwnFrame) {
  Mailbox box;
  const auto t0 = std::chrono::steady_clock::now();
  auto a = std::async(std::launch::async, [&] { return box.Take(1, 1, 0, 7, kPatience); });
  auto b = std::async(std::launch::async, [&] { return box.Take(1, 1, 2, 7, kPatience); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  box.Put(MakeFrame(1, 2, 1, 7, 2.0f));
  box.Put(MakeFrame(1, 0, 1, 7, 1.0f));
  auto fa = a.get();
  auto fb = b.get();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, kPrompt);
  ASSERT_TRUE(fa.ok() && fb.ok());
  EXPECT_EQ(fa->payload[0], 1.0f);
  EXPECT_EQ(fb->payload[0], 2.0f);
}

TEST(MailboxTest, AbortEndsAWaitAtOnceWithItsReason) {
  Mailbox box;
  const auto t0 = std::chrono::steady_clock::now();
  auto waiter = std::async(std::launch::async, [&] { return box.Take(1, 1, 0, 7, kPatience); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  box.AbortJob(1, absl::UnavailableError("worker host 3 failed"));
  auto f = waiter.get();
  EXPECT_EQ(f.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("worker host 3"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, kPrompt);
  box.Put(MakeFrame(1, 0, 1, 7, 1.0f));  // late frames of an aborted job are dropped
  EXPECT_EQ(box.pending(), 0u);
}

TEST(MailboxTest, AWaitThatSeesNothingTimesOutNamingTheLink) {
  Mailbox box;
  box.Put(MakeFrame(1, 2, 1, 7, 1.0f));  // not the one it waits for
  auto f = box.Take(1, 1, 0, 7, absl::Milliseconds(50));
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("chip 1 waited"));
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("from chip 0"));
}

}  // namespace
}  // namespace tpuemu
