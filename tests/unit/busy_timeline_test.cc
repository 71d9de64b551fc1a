// A resource's emulated busy time: indivisible work takes one idle stretch
// that fits; a message takes idle time wherever the link has some.
#include "core/base/busy_timeline.h"

#include "gtest/gtest.h"

namespace tpuemu {
namespace {

TEST(BusyTimelineTest, IndivisibleWorkTakesTheFirstStretchThatFits) {
  BusyTimeline t;
  EXPECT_EQ(t.Book(0, 1), 0);  // [0, 1)
  EXPECT_EQ(t.Book(3, 1), 3);  // [3, 4): the gap [1, 3) stays
  EXPECT_EQ(t.Book(0, 3), 4);  // too long for the gap: after [3, 4)
  EXPECT_EQ(t.Book(0, 2), 1);  // fits the gap exactly
  EXPECT_EQ(t.end(), 7);
}

TEST(BusyTimelineTest, AMessageFillsEveryIdleStretchFromWhenItIsReady) {
  BusyTimeline t;
  t.Book(1, 1);  // [1, 2)
  t.Book(3, 1);  // [3, 4)
  // 2.5 units ready at 0.5: [0.5, 1), [2, 3), then [4, 5): ends at 5.
  const auto [first, last] = t.BookSpread(0.5, 2.5);
  EXPECT_DOUBLE_EQ(first, 0.5);
  EXPECT_DOUBLE_EQ(last, 5);
  // The link is now busy from 0.5 to 5 without a gap.
  EXPECT_EQ(t.Book(0, 0.5), 0);
  EXPECT_DOUBLE_EQ(t.Book(0, 1), 5);
}

TEST(BusyTimelineTest, AMessageReadyInsideABusyStretchStartsAtItsEnd) {
  BusyTimeline t;
  t.Book(0, 2);
  const auto [first, last] = t.BookSpread(1, 1);
  EXPECT_DOUBLE_EQ(first, 2);
  EXPECT_DOUBLE_EQ(last, 3);
  // On an idle link it is one stretch, as Book would give.
  BusyTimeline idle;
  const auto [f, l] = idle.BookSpread(4, 2);
  EXPECT_DOUBLE_EQ(f, 4);
  EXPECT_DOUBLE_EQ(l, 6);
}

}  // namespace
}  // namespace tpuemu
