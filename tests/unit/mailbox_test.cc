// The mailbox wakes a chip only for the frame it waits for; these check that
// every waiter still gets its frame, whatever arrives first, and that abort and
// timeout still end a wait. It takes frames and aborts only for jobs that are
// open, and holds no more of a job's bytes than the job allows.
#include "core/wire/mailbox.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "core/wire/run_number.h"

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
constexpr uint64_t kRoomy = 1 << 20;  // bytes a test job may hold

// A mailbox where jobs 1 and 2 are open.
struct OpenBox {
  OpenBox() {
    box.OpenJob(1, kRoomy);
    box.OpenJob(2, kRoomy);
  }
  Mailbox box;
};

TEST(MailboxTest, AFrameThatArrivedFirstIsTakenAtOnce) {
  OpenBox open;
  Mailbox& box = open.box;
  box.Put(MakeFrame(1, 0, 1, 7, 3.0f));
  auto f = box.Take(1, 1, 0, 7, kPatience);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->payload[0], 3.0f);
  EXPECT_EQ(box.pending(), 0u);
}

TEST(MailboxTest, AWaiterGetsItsFrameAfterOtherLinksFramesArrive) {
  OpenBox open;
  Mailbox& box = open.box;
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
  OpenBox open;
  Mailbox& box = open.box;
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
  OpenBox open;
  Mailbox& box = open.box;
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
  OpenBox open;
  Mailbox& box = open.box;
  box.Put(MakeFrame(1, 2, 1, 7, 1.0f));  // not the one it waits for
  auto f = box.Take(1, 1, 0, 7, absl::Milliseconds(50));
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("chip 1 waited"));
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("from chip 0"));
}

TEST(MailboxTest, FramesOfJobsThatAreNotOpenAreDroppedAndCounted) {
  OpenBox open;
  Mailbox& box = open.box;
  for (int i = 0; i < 300; ++i) box.Put(MakeFrame(99, 0, 1, i, 1.0f));  // a job this host never had
  EXPECT_EQ(box.pending(), 0u) << "frames of an unknown job must not be held";
  EXPECT_EQ(box.dropped_frames(), 300u);
  box.Put(MakeFrame(1, 0, 1, 7, 1.0f));
  box.CloseJob(1);
  EXPECT_EQ(box.pending(), 0u) << "closing a job drops what it left";
  box.Put(MakeFrame(1, 0, 1, 8, 1.0f));  // a late frame of the closed job
  EXPECT_EQ(box.pending(), 0u);
  EXPECT_EQ(box.dropped_frames(), 301u);
}

TEST(MailboxTest, AJobHoldsNoMoreThanItsBytesAndIsAbortedNamingThem) {
  Mailbox box;
  box.OpenJob(5, 3 * 4 * sizeof(float));  // three of MakeFrame's frames
  for (int tag = 0; tag < 3; ++tag) box.Put(MakeFrame(5, 0, 1, tag, 1.0f));
  EXPECT_EQ(box.pending(), 3u);
  ASSERT_TRUE(box.Take(5, 1, 0, 0, kPatience).ok());  // taking one makes room for one
  box.Put(MakeFrame(5, 0, 1, 3, 1.0f));
  EXPECT_EQ(box.pending(), 3u);
  box.Put(MakeFrame(5, 0, 1, 4, 1.0f));  // one too many
  EXPECT_EQ(box.pending(), 0u) << "the job is aborted and its frames dropped";
  auto f = box.Take(5, 1, 0, 1, kPatience);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("more than its plan allows here (48)"));
}

TEST(MailboxTest, AnAbortOfAJobNumberNotYetUsedLeavesThatJobAlone) {
  Mailbox box;
  EXPECT_FALSE(box.AbortJob(7, absl::AbortedError("job aborted: cancelled by the user")));
  box.OpenJob(7, kRoomy);  // job 7 comes later
  box.Put(MakeFrame(7, 0, 1, 1, 2.0f));
  auto f = box.Take(7, 1, 0, 1, kPatience);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->payload[0], 2.0f);
}

TEST(MailboxTest, AnAbortedJobStaysAbortedAfterItClosesButOnlyTheLastFewAreRemembered) {
  Mailbox box;
  box.OpenJob(1, kRoomy);
  EXPECT_TRUE(box.AbortJob(1, absl::AbortedError("job aborted: worker host 2 failed")));
  box.CloseJob(1);
  box.OpenJob(1, kRoomy);  // a RunJob that came after the abort prepares it again
  EXPECT_EQ(box.Take(1, 1, 0, 7, kPatience).status().code(), absl::StatusCode::kAborted);
  box.CloseJob(1);
  for (uint64_t job = 2; job < 2 + Mailbox::kRememberedAborts; ++job) {
    box.OpenJob(job, kRoomy);
    box.AbortJob(job, absl::AbortedError("job aborted"));
    box.CloseJob(job);
  }
  box.OpenJob(1, kRoomy);  // the oldest abort is forgotten: memory stays bounded
  box.Put(MakeFrame(1, 0, 1, 7, 3.0f));
  EXPECT_TRUE(box.Take(1, 1, 0, 7, kPatience).ok());
}

TEST(MailboxTest, AbortsAreForgottenWhenTheWorkerRegistersAgainThoseOfOpenJobsOnceTheyClose) {
  Mailbox box;
  box.OpenJob(1, kRoomy);
  box.AbortJob(1, absl::AbortedError("job aborted: cancelled by the user"));
  box.CloseJob(1);
  box.OpenJob(2, kRoomy);
  box.AbortJob(2, absl::AbortedError("job aborted: this worker registered with its coordinator again"));
  box.ForgetAborts();
  // Still open: still aborted, for its chips still running.
  EXPECT_EQ(box.Take(2, 1, 0, 7, kPatience).status().code(), absl::StatusCode::kAborted);
  box.CloseJob(2);
  // A new coordinator's runs of the same numbers.
  for (uint64_t job : {1, 2}) {
    box.OpenJob(job, kRoomy);
    box.Put(MakeFrame(job, 0, 1, 7, 3.0f));
    EXPECT_TRUE(box.Take(job, 1, 0, 7, kPatience).ok()) << "job " << job;
  }
}

// What a hook saw, and in which thread.
struct RecordingHook : MailboxHook {
  void Arrived(Frame frame) override {
    std::lock_guard<std::mutex> lock(mu);
    arrived.push_back(frame.payload[0]);
    arrived_on = std::this_thread::get_id();
  }
  void Wake() override {
    std::lock_guard<std::mutex> lock(mu);
    ++woken;
  }
  std::mutex mu;
  std::vector<float> arrived;
  std::thread::id arrived_on;
  int woken = 0;
};

TEST(MailboxTest, AFrameHereAndUsableIsTakenWithoutLeavingTheHook) {
  OpenBox open;
  Mailbox& box = open.box;
  box.Put(MakeFrame(1, 0, 1, 7, 3.0f));
  RecordingHook hook;
  auto f = box.TakeOrHook(1, 1, 0, 7, &hook);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(f->has_value());
  EXPECT_EQ((*f)->payload[0], 3.0f);
  EXPECT_FALSE(box.Unhook(1, 1, 0, 7)) << "nothing was left";
  EXPECT_EQ(box.pending(), 0u);
}

TEST(MailboxTest, AHookedFrameRunsTheHookInThePuttingThreadWhenItMayRunTheChip) {
  OpenBox open;
  Mailbox& box = open.box;
  RecordingHook hook;
  auto f = box.TakeOrHook(1, 1, 0, 7, &hook);
  ASSERT_TRUE(f.ok() && !f->has_value());
  box.Put(MakeFrame(1, 2, 1, 7, 1.0f), /*may_run=*/true);  // another link's frame: held
  EXPECT_TRUE(hook.arrived.empty());
  std::thread putter([&] { box.Put(MakeFrame(1, 0, 1, 7, 5.0f), /*may_run=*/true); });
  const std::thread::id putter_id = putter.get_id();
  putter.join();
  ASSERT_EQ(hook.arrived, std::vector<float>{5.0f});
  EXPECT_EQ(hook.arrived_on, putter_id);
  EXPECT_EQ(hook.woken, 0);
  EXPECT_EQ(box.pending(), 1u) << "the hooked frame went to the hook, not into the mailbox";
  EXPECT_FALSE(box.Unhook(1, 1, 0, 7)) << "a hook is called once";
}

TEST(MailboxTest, AHookedFrameFromAThreadThatMayNotRunTheChipWakesItAndWaitsForItsTake) {
  OpenBox open;
  Mailbox& box = open.box;
  RecordingHook hook;
  ASSERT_TRUE(box.TakeOrHook(1, 1, 0, 7, &hook).ok());
  box.Put(MakeFrame(1, 0, 1, 7, 2.0f));  // a chip's own thread on this host
  EXPECT_EQ(hook.woken, 1);
  EXPECT_TRUE(hook.arrived.empty());
  auto f = box.Take(1, 1, 0, 7, kPatience);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->payload[0], 2.0f);
}

std::chrono::nanoseconds SteadyNow() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch());
}

// Job 1's frame from chip 0 to chip 1 (tag 7), sent `now` and usable `in` later.
Frame PacedFrame(std::chrono::nanoseconds now, std::chrono::nanoseconds in) {
  Frame paced = MakeFrame(1, 0, 1, 7, 4.0f);
  paced.header.sent_at_ns = now.count();
  paced.header.due_at_ns = (now + in).count();
  return paced;
}

TEST(MailboxTest, APacedFrameNotYetUsableWakesTheHookAtOnceAndTakeWaitsForIt) {
  OpenBox open;
  Mailbox& box = open.box;
  const auto now = SteadyNow();
  box.Put(PacedFrame(now, std::chrono::seconds(1)), /*may_run=*/true);
  RecordingHook hook;
  auto f = box.TakeOrHook(1, 1, 0, 7, &hook);
  ASSERT_TRUE(f.ok() && !f->has_value()) << "a frame not yet usable is not handed out";
  EXPECT_EQ(hook.woken, 1);
  EXPECT_FALSE(box.Unhook(1, 1, 0, 7)) << "woken, not left";
  auto taken = box.Take(1, 1, 0, 7, kPatience);
  ASSERT_TRUE(taken.ok());
  EXPECT_GE(SteadyNow(), now + std::chrono::seconds(1));
}

// A cancelled paced job held its chips (and the next job) until the frame was due.
TEST(MailboxTest, AbortEndsAWaitForAPacedFrameNotYetUsable) {
  OpenBox open;
  Mailbox& box = open.box;
  const auto now = SteadyNow();
  box.Put(PacedFrame(now, std::chrono::seconds(30)), /*may_run=*/true);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    box.AbortJob(1, absl::CancelledError("cancelled by the user"));
  });
  auto taken = box.Take(1, 1, 0, 7, kPatience);
  aborter.join();
  ASSERT_FALSE(taken.ok());
  EXPECT_THAT(taken.status().message(), HasSubstr("cancelled by the user"));
  EXPECT_LT(SteadyNow(), now + kPrompt);
}

// A coordinator restarted without its job store numbers jobs from 1 again;
// its epoch keeps a frame of the last one's job-1, still in flight, out of the new job-1.
TEST(MailboxTest, AFrameOfTheSameJobNumberFromAnotherCoordinatorsEpochIsDropped) {
  const uint64_t before = RunNumber(1, 0, /*epoch=*/5), now = RunNumber(1, 0, /*epoch=*/6);
  EXPECT_NE(before, now);
  EXPECT_EQ(JobOfRun(now), 1u);
  EXPECT_TRUE(FirstAttempt(now));
  EXPECT_EQ(RunName(RunNumber(2, 3, kRunEpochMask)), "job-2 (attempt 4)");
  EXPECT_EQ(JobOfRun(RunNumber(uint64_t{1} << 31, 255, kRunEpochMask)), uint64_t{1} << 31);
  Mailbox box;
  box.OpenJob(now, kRoomy);
  box.Put(MakeFrame(before, 0, 1, 7, 1.0f));
  EXPECT_EQ(box.dropped_frames(), 1u);
  EXPECT_EQ(box.pending(), 0u);
}

TEST(MailboxTest, AbortAndCloseWakeTheJobsHooksAndAnAbortedJobHooksNothing) {
  OpenBox open;
  Mailbox& box = open.box;
  RecordingHook a, b, other;
  ASSERT_TRUE(box.TakeOrHook(1, 1, 0, 7, &a).ok());
  ASSERT_TRUE(box.TakeOrHook(1, 3, 2, 9, &b).ok());
  ASSERT_TRUE(box.TakeOrHook(2, 1, 0, 7, &other).ok());
  box.AbortJob(1, absl::UnavailableError("worker host 3 failed"));
  EXPECT_EQ(a.woken, 1);
  EXPECT_EQ(b.woken, 1);
  EXPECT_EQ(other.woken, 0) << "another job's hook stays";
  auto f = box.TakeOrHook(1, 1, 0, 8, &a);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kUnavailable);
  box.CloseJob(2);
  EXPECT_EQ(other.woken, 1);
}

TEST(MailboxTest, AHookedFrameThatTakesItsJobPastItsBytesWakesTheHookToHearOfTheAbort) {
  Mailbox box;
  box.OpenJob(5, 2 * 4 * sizeof(float));  // two of MakeFrame's frames
  RecordingHook hook;
  ASSERT_TRUE(box.TakeOrHook(5, 1, 0, 9, &hook).ok());
  box.Put(MakeFrame(5, 0, 1, 1, 1.0f));
  box.Put(MakeFrame(5, 0, 1, 2, 1.0f));
  box.Put(MakeFrame(5, 0, 1, 9, 1.0f));  // the hooked one, from a thread that may not run the chip: one too many
  EXPECT_EQ(hook.woken, 1) << "a hook lost here would leave its chip waiting for good";
  EXPECT_FALSE(box.Unhook(5, 1, 0, 9));
  EXPECT_EQ(box.Take(5, 1, 0, 9, kPatience).status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(MailboxTest, AHookTakenBackIsNotCalled) {
  OpenBox open;
  Mailbox& box = open.box;
  RecordingHook hook;
  ASSERT_TRUE(box.TakeOrHook(1, 1, 0, 7, &hook).ok());
  EXPECT_TRUE(box.Unhook(1, 1, 0, 7));
  box.Put(MakeFrame(1, 0, 1, 7, 1.0f), /*may_run=*/true);
  EXPECT_TRUE(hook.arrived.empty());
  EXPECT_EQ(hook.woken, 0);
  EXPECT_EQ(box.pending(), 1u);
}

}  // namespace
}  // namespace tpuemu
