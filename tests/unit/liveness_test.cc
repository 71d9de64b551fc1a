// How the coordinator judges a worker (coordinator/liveness.h): late
// heartbeats make it asked, an answer keeps it (slow), a question pending
// is not a verdict, no answer within the timeout or a connection gone makes
// it lost, and a heartbeat brings it back.
#include "coordinator/awake_clock.h"
#include "coordinator/liveness.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

const absl::Duration kTimeout = absl::Seconds(3);
const absl::Time kStart = absl::FromUnixSeconds(1000);

absl::Time At(double seconds) { return kStart + absl::Seconds(seconds); }

TEST(LivenessTest, OnTimeHeartbeatsNeedNoQuestions) {
  Liveness live;
  live.Reset(kStart);
  for (double t = 0.5; t < 10; t += 0.5) {
    live.Heartbeat(At(t));
    EXPECT_TRUE(live.Alive(At(t + 0.4), kTimeout));
    EXPECT_FALSE(live.Slow(At(t + 0.4), kTimeout));
    EXPECT_FALSE(live.NeedsProbe(At(t + 0.4), kTimeout));
  }
}

TEST(LivenessTest, AWorkerThatAnswersWhileItsHeartbeatsAreLateIsSlowNotLost) {
  Liveness live;
  live.Reset(kStart);
  EXPECT_FALSE(live.NeedsProbe(At(1.4), kTimeout));
  ASSERT_TRUE(live.NeedsProbe(At(1.5), kTimeout));  // half the timeout late: ask
  live.ProbeStarted(At(1.5), Liveness::ProbeDeadline(kTimeout));
  EXPECT_FALSE(live.NeedsProbe(At(1.6), kTimeout));  // one question at a time
  live.Probed(At(2.5), absl::OkStatus(), absl::Seconds(1));
  EXPECT_TRUE(live.Alive(At(3.5), kTimeout));
  EXPECT_TRUE(live.Slow(At(3.5), kTimeout));  // no heartbeat for 3.5 s, but it answers
  // Answers keep it alive as long as they come.
  for (double t = 4; t < 20; t += 2) {
    ASSERT_TRUE(live.NeedsProbe(At(t), kTimeout)) << t;
    live.ProbeStarted(At(t), Liveness::ProbeDeadline(kTimeout));
    live.Probed(At(t + 0.5), absl::OkStatus(), absl::Milliseconds(500));
    EXPECT_TRUE(live.Alive(At(t + 1), kTimeout)) << t;
    EXPECT_TRUE(live.Slow(At(t + 1), kTimeout)) << t;
  }
  live.Heartbeat(At(20));
  EXPECT_FALSE(live.Slow(At(20.1), kTimeout));
}

TEST(LivenessTest, AQuestionInFlightIsNoVerdictAndNoAnswerLosesTheWorker) {
  Liveness live;
  live.Reset(kStart);
  live.ProbeStarted(At(1.8), Liveness::ProbeDeadline(kTimeout));
  EXPECT_TRUE(live.Alive(At(3.2), kTimeout)) << "the question is still within its deadline";
  live.Probed(At(3.3), absl::DeadlineExceededError("Deadline Exceeded"), absl::Milliseconds(1800));
  EXPECT_FALSE(live.Alive(At(3.3), kTimeout));
  EXPECT_THAT(live.LostReason(At(3.3), kTimeout),
              AllOf(HasSubstr("no heartbeat for 3.3s (the limit is 3s)"),
                    HasSubstr("did not answer a status call within 1.8s either")));
  live.Heartbeat(At(4));  // back (SIGCONT)
  EXPECT_TRUE(live.Alive(At(4), kTimeout));
}

TEST(LivenessTest, AQuestionPastItsDeadlineIsNoAnswerEvenBeforeItReturns) {
  Liveness live;
  live.Reset(kStart);
  live.ProbeStarted(At(1.5), absl::Milliseconds(1500));
  EXPECT_TRUE(live.Alive(At(2.9), kTimeout));
  EXPECT_FALSE(live.Alive(At(3.1), kTimeout));
  EXPECT_THAT(live.LostReason(At(3.1), kTimeout),
              AllOf(HasSubstr("no heartbeat for 3.1s"), HasSubstr("did not answer a status call within 1.5s either")));
}

TEST(LivenessTest, AskingALostWorkerAgainDoesNotCountItAliveUntilItAnswers) {
  Liveness live;
  live.Reset(kStart);
  live.ProbeStarted(At(1.5), absl::Milliseconds(1500));
  live.Probed(At(3), absl::DeadlineExceededError("Deadline Exceeded"), absl::Milliseconds(1500));
  ASSERT_FALSE(live.Alive(At(3.1), kTimeout));
  ASSERT_TRUE(live.NeedsProbe(At(3.1), kTimeout));  // it may come back: keep asking
  live.ProbeStarted(At(3.1), absl::Milliseconds(1500));
  EXPECT_FALSE(live.Alive(At(3.2), kTimeout)) << "a stopped worker must not flap alive with every question";
  live.Probed(At(3.5), absl::OkStatus(), absl::Milliseconds(400));  // resumed
  EXPECT_TRUE(live.Alive(At(3.6), kTimeout));
}

TEST(LivenessTest, AConnectionResetLosesTheWorkerAtOnceUntilItsNextHeartbeat) {
  Liveness live;
  live.Reset(kStart);
  live.Heartbeat(At(1));
  live.ProbeStarted(At(1), Liveness::ProbeDeadline(kTimeout));
  live.Probed(At(1.1), absl::UnavailableError("Connection refused"), absl::Milliseconds(2));
  EXPECT_FALSE(live.Alive(At(1.1), kTimeout));
  EXPECT_THAT(live.LostReason(At(1.1), kTimeout),
              AllOf(HasSubstr("reset or closed (Connection refused)"), Not(HasSubstr("heartbeat"))));
  EXPECT_FALSE(live.NeedsProbe(At(5), kTimeout)) << "lost: nothing more to ask";
  live.Heartbeat(At(2));
  EXPECT_TRUE(live.Alive(At(2), kTimeout));
}

// The coordinator stopped for 6 s (SIGSTOP) read no heartbeats meanwhile:
// on the clock it judges by, those 6 s did not pass, so its workers are
// alive when it wakes; a worker that has really gone is lost a timeout of
// the coordinator's waking time later.
TEST(LivenessTest, TimeTheCoordinatorSleptIsNotCountedAgainstItsWorkers) {
  AwakeClock clock;
  Liveness live;
  live.Reset(clock.Read(kStart));
  for (double t = 0.1; t <= 1.0; t += 0.1) clock.Read(At(t));  // the watch loop's readings
  live.Heartbeat(clock.Read(At(1)));
  EXPECT_TRUE(live.Alive(clock.Read(At(7)), kTimeout)) << "6 s asleep";
  EXPECT_EQ(clock.slept(), absl::Seconds(6));
  for (double t = 7.1; t < 9.0; t += 0.1) clock.Read(At(t));
  EXPECT_TRUE(live.Alive(clock.Read(At(9)), kTimeout));
  for (double t = 9.1; t < 10.1; t += 0.1) clock.Read(At(t));
  EXPECT_FALSE(live.Alive(clock.Read(At(10.1)), kTimeout)) << "3.1 s awake without a heartbeat";
}

TEST(LivenessTest, ProbesGetHalfTheTimeoutAndAtMostFiveSeconds) {
  EXPECT_EQ(Liveness::ProbeDeadline(absl::Seconds(3)), absl::Milliseconds(1500));
  EXPECT_EQ(Liveness::ProbeDeadline(absl::Seconds(60)), absl::Seconds(5));
  EXPECT_EQ(Liveness::ProbeDeadline(absl::InfiniteDuration()), absl::Seconds(5));
}

}  // namespace
}  // namespace tpuemu
