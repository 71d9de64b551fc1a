// The coordinator's per-job trace stays within its cap, keeps the latest
// steps, says what it dropped and why, and reads back in pieces of bounded
// size that put together the same spans.
#include "coordinator/bounded_trace.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

using testing::HasSubstr;

// One chip's step of `spans` spans, 1 us apart.
std::vector<ChipRunResult> Step(int spans) {
  ChipRunResult chip;
  for (int i = 0; i < spans; ++i) {
    chip.trace.push_back({"chip 0", "op " + std::to_string(i), i * 1e-6, (i + 1) * 1e-6, static_cast<uint64_t>(i)});
  }
  return {chip};
}

v1::JobTrace ReadWhole(const BoundedTrace& trace, size_t piece_bytes, std::vector<size_t>* sizes = nullptr,
                       int64_t latest_steps = 0) {
  TracePieces pieces("job-1", trace.Read(latest_steps));
  v1::JobTrace whole, piece;
  while (pieces.Next(piece_bytes, &piece)) {
    if (sizes) sizes->push_back(piece.ByteSizeLong());
    whole.MergeFrom(piece);
  }
  return whole;
}

TEST(BoundedTraceTest, KeepsTheLatestStepsWithinItsCapAndReportsTheDrops) {
  BoundedTrace trace(10);
  for (int step = 0; step < 5; ++step) trace.AddStep(step, step * 1.0, Step(4));
  EXPECT_EQ(trace.spans(), 8);  // steps 3 and 4; step 2 too would be 12
  const v1::JobTrace read = ReadWhole(trace, 1 << 20);
  EXPECT_EQ(read.id(), "job-1");
  const v1::TraceExtent& kept = read.extent();
  EXPECT_EQ(kept.steps(), 5);
  EXPECT_EQ(kept.first_kept_step(), 3);
  EXPECT_EQ(kept.last_kept_step(), 4);
  EXPECT_EQ(kept.spans(), 8u);
  EXPECT_EQ(kept.spans_dropped(), 12u);
  EXPECT_THAT(kept.dropped_why(), HasSubstr("at most 10 spans"));
  ASSERT_EQ(read.events_size(), 8);
  EXPECT_EQ(read.events(0).name(), "step 3: op 0");
  EXPECT_EQ(read.events(0).track(), "chip 0");
  EXPECT_DOUBLE_EQ(read.events(0).start_s(), 3.0);
  EXPECT_DOUBLE_EQ(read.events(7).end_s(), 4.0 + 4e-6);
  EXPECT_EQ(read.events(7).bytes(), 3u);
}

// A job resumed from its checkpoint after step 2 runs steps 3 on again:
// its trace forgets the first run of them, and the second run goes on from
// where step 2 ended (it started again from 0, on top of steps 0-2).
TEST(BoundedTraceTest, DropFromForgetsTheStepsARunResumesAndItsClockGoesOnFromTheLastKept) {
  BoundedTrace trace(100);
  std::vector<ChipRunResult> step = Step(2);
  step[0].emulated_s = 1.0;
  for (int s = 0; s < 5; ++s) trace.AddStep(s, s * 1.0, step);
  EXPECT_DOUBLE_EQ(trace.end_s(), 5.0);
  trace.DropFrom(3);
  EXPECT_EQ(trace.spans(), 6);
  EXPECT_DOUBLE_EQ(trace.end_s(), 3.0);
  for (int s = 3; s < 6; ++s) trace.AddStep(s, trace.end_s(), step);
  const v1::JobTrace read = ReadWhole(trace, 1 << 20);
  EXPECT_EQ(read.extent().steps(), 6);
  EXPECT_EQ(read.extent().last_kept_step(), 5);
  ASSERT_EQ(read.events_size(), 12);
  for (int i = 0; i < 12; ++i) EXPECT_DOUBLE_EQ(read.events(i).start_s(), i / 2 + (i % 2) * 1e-6) << i;

  // Resumed before the first step still kept (the cap dropped steps 0-3):
  // where step 2 began is not known, so the trace starts again with it.
  BoundedTrace capped(4);
  for (int s = 0; s < 6; ++s) capped.AddStep(s, s * 1.0, step);
  capped.DropFrom(2);
  EXPECT_EQ(capped.spans(), 0);
  EXPECT_DOUBLE_EQ(capped.end_s(), 0);
  capped.AddStep(2, capped.end_s(), step);
  const v1::TraceExtent kept = ReadWhole(capped, 1 << 20).extent();
  EXPECT_EQ(kept.steps(), 1);
  EXPECT_EQ(kept.first_kept_step(), 2);
  EXPECT_THAT(kept.dropped_why(), HasSubstr("resumed at step 2"));
}

TEST(BoundedTraceTest, AStepBiggerThanTheCapKeepsItsFirstSpans) {
  BoundedTrace trace(3);
  trace.AddStep(0, 0, Step(2));
  trace.AddStep(1, 1, Step(5));
  const v1::JobTrace read = ReadWhole(trace, 1 << 20);
  EXPECT_EQ(read.extent().first_kept_step(), 1);
  EXPECT_EQ(read.extent().spans(), 3u);
  EXPECT_EQ(read.extent().spans_dropped(), 4u);  // step 0's two, step 1's last two
  ASSERT_EQ(read.events_size(), 3);
  EXPECT_EQ(read.events(2).name(), "step 1: op 2");
}

TEST(BoundedTraceTest, ClearDropsEverySpanSayingWhy) {
  BoundedTrace trace(100);
  trace.AddStep(0, 0, Step(4));
  trace.Clear("the pod-wide budget");
  EXPECT_EQ(trace.spans(), 0);
  const v1::JobTrace read = ReadWhole(trace, 1 << 20);
  EXPECT_EQ(read.events_size(), 0);
  EXPECT_EQ(read.extent().steps(), 1);
  EXPECT_EQ(read.extent().spans_dropped(), 4u);
  EXPECT_EQ(read.extent().dropped_why(), "the pod-wide budget");
}

TEST(BoundedTraceTest, PiecesStayWithinTheirSizeAndPutTogetherTheWholeTrace) {
  BoundedTrace trace(1'000'000);
  for (int step = 0; step < 20; ++step) trace.AddStep(step, step, Step(500));
  std::vector<size_t> sizes;
  const v1::JobTrace read = ReadWhole(trace, 4096, &sizes);
  ASSERT_EQ(read.events_size(), 20 * 500);
  EXPECT_GT(sizes.size(), 20u);
  for (size_t size : sizes) EXPECT_LE(size, 4096u);
  for (int step = 0; step < 20; ++step) {
    EXPECT_EQ(read.events(step * 500 + 499).name(), "step " + std::to_string(step) + ": op 499");
  }
  EXPECT_EQ(read.extent().spans_dropped(), 0u);
}

TEST(BoundedTraceTest, AReadOfTheLatestStepsHasOnlyTheirSpansAndTheWholeExtent) {
  BoundedTrace trace(1000);
  for (int step = 0; step < 6; ++step) trace.AddStep(step, step, Step(3));
  const v1::JobTrace latest = ReadWhole(trace, 1 << 20, nullptr, 2);
  ASSERT_EQ(latest.events_size(), 6);
  EXPECT_EQ(latest.events(0).name(), "step 4: op 0");
  EXPECT_EQ(latest.events(5).name(), "step 5: op 2");
  EXPECT_EQ(latest.extent().first_kept_step(), 0);  // what the coordinator keeps, not what this read sent
  EXPECT_EQ(latest.extent().spans(), 18u);
  EXPECT_EQ(ReadWhole(trace, 1 << 20, nullptr, 6).events_size(), 18);
  EXPECT_EQ(ReadWhole(trace, 1 << 20, nullptr, 100).events_size(), 18);
  EXPECT_EQ(ReadWhole(trace, 1 << 20, nullptr, 0).events_size(), 18);  // 0: every kept step
}

TEST(BoundedTraceTest, ASnapshotOutlivesLaterSteps) {
  BoundedTrace trace(4);
  trace.AddStep(0, 0, Step(4));
  TracePieces pieces("job-1", trace.Read());
  trace.AddStep(1, 1, Step(4));  // drops step 0 from the trace, not from the snapshot
  v1::JobTrace piece;
  ASSERT_TRUE(pieces.Next(1 << 20, &piece));
  ASSERT_EQ(piece.events_size(), 4);
  EXPECT_EQ(piece.events(0).name(), "step 0: op 0");
  EXPECT_FALSE(pieces.Next(1 << 20, &piece));
}

}  // namespace
}  // namespace tpuemu
