// Frames lend bytes in place, chips hold what they only pass on, and unpaced
// links hand frames over in the sender's thread without waiting for them to leave.
#include <sys/resource.h>

#include <cstdlib>
#include <atomic>
#include <future>
#include <mutex>
#include <thread>

#include "core/wire/fabric.h"
#include "core/wire/frame.h"
#include "core/wire/job_abort.h"
#include "core/wire/link_sender.h"
#include "core/collective/transit_bytes.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

std::shared_ptr<float[]> Counting(int n, float base) {
  std::shared_ptr<float[]> b(new float[n]);
  for (int i = 0; i < n; ++i) b[i] = base + i;
  return b;
}

const std::byte* Bytes(const std::shared_ptr<float[]>& b, int first) {
  return reinterpret_cast<const std::byte*>(b.get() + first);
}

std::vector<float> Read(const std::vector<Segment>& segments) {
  Frame f;
  f.lent = segments;
  std::vector<float> out(f.elements());
  f.CopyOut(0, out.size(), out.data());
  return out;
}

long MinorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// What a transport allocates after WarmHeap lands on pages already mapped:
// touching it costs (almost) no page faults. (ctest runs each test in a
// process of its own, so the heap starts cold.)
TEST(WarmHeapTest, BuffersAllocatedAfterwardsDoNotFaultIn) {
  PrepareProcessForDataPath();
  constexpr size_t kBytes = 32 << 20;
  WarmHeap(kBytes);
  const long before = MinorFaults();
  std::vector<char*> slices;  // like gRPC's receive slices: 4 MiB at a time
  for (size_t done = 0; done < kBytes; done += 4 << 20) {
    slices.push_back(static_cast<char*>(std::malloc(4 << 20)));
    for (size_t i = 0; i < (4 << 20); i += 4096) slices.back()[i] = 1;
  }
  const long faults = MinorFaults() - before;
  for (char* p : slices) std::free(p);
  EXPECT_LT(faults, 100) << "touching " << (kBytes >> 20) << " MiB took " << faults << " page faults";
}

TEST(FrameTest, LendsSubrangesOfLentSegmentsWithTheirOwnersNotTheFrame) {
  auto a = Counting(10, 0), b = Counting(10, 100);
  auto frame = std::make_shared<Frame>();
  // A float split across two segments, as gRPC slices may split one.
  frame->lent = {{Bytes(a, 2), 3 * sizeof(float) + 2, a}, {Bytes(a, 5) + 2, 2, a}, {Bytes(b, 0), 4 * sizeof(float), b}};
  ASSERT_EQ(frame->elements(), 8u);
  EXPECT_EQ(frame->contiguous(), nullptr);
  std::vector<Segment> out;
  frame->Lend(2, 4, frame, &out);
  EXPECT_EQ(Read(out), (std::vector<float>{4, 5, 100, 101}));
  for (const Segment& s : out) EXPECT_NE(s.keep, std::shared_ptr<const void>(frame)) << "lent pieces keep their owner";
  std::weak_ptr<float[]> weak_a = a;
  a.reset();
  frame.reset();
  EXPECT_FALSE(weak_a.expired());
  out.clear();
  EXPECT_TRUE(weak_a.expired());
}

TEST(FrameTest, LendsItsOwnPayloadKeepingItselfAlive) {
  auto frame = std::make_shared<Frame>();
  frame->payload = {1, 2, 3, 4, 5};
  EXPECT_EQ(frame->contiguous(), frame->payload.data());
  std::vector<Segment> out;
  frame->Lend(1, 3, frame, &out);
  std::weak_ptr<Frame> weak = frame;
  frame.reset();
  ASSERT_FALSE(weak.expired());
  EXPECT_EQ(Read(out), (std::vector<float>{2, 3, 4}));
}

TEST(TransitBytesTest, LendsHeldPiecesAndTheBufferAroundThem) {
  auto buffer = Counting(20, 0);
  auto arrived = std::make_shared<Frame>();
  arrived->payload = {50, 51, 52, 53, 54, 55};
  TransitBytes transit;
  transit.Hold({4, 3}, arrived, 0);   // buffer 4..6 are the frame's 0..2
  transit.Hold({10, 3}, arrived, 3);  // buffer 10..12 are the frame's 3..5
  std::vector<Segment> out;
  transit.Lend(buffer, {2, 13}, &out);
  EXPECT_EQ(Read(out), (std::vector<float>{2, 3, 50, 51, 52, 7, 8, 9, 53, 54, 55, 13, 14}));
  out.clear();
  transit.Lend(buffer, {5, 6}, &out);  // starts inside a held piece, ends inside the next
  EXPECT_EQ(Read(out), (std::vector<float>{51, 52, 7, 8, 9, 53}));
}

TEST(TransitBytesTest, ReleaseKeepsOnlyWhatIsOutsideTheReleasedRange) {
  auto buffer = Counting(20, 0);
  auto arrived = std::make_shared<Frame>();
  arrived->payload = {50, 51, 52, 53, 54, 55, 56, 57};
  TransitBytes transit;
  transit.Hold({4, 8}, arrived, 0);
  transit.Release({6, 3});  // the buffer holds 6..8 now
  std::vector<Segment> out;
  transit.Lend(buffer, {4, 8}, &out);
  EXPECT_EQ(Read(out), (std::vector<float>{50, 51, 6, 7, 8, 55, 56, 57}));
  transit.Release({0, 20});
  EXPECT_TRUE(transit.empty());
}

// A fabric that records where frames were handed over, and keeps the
// completions of Send until the test releases them (a wire not yet drained);
// Deliver waits for its release, as a wire would.
class HeldFabric : public Fabric {
 public:
  absl::Status Deliver(Frame&& frame) override {
    std::promise<absl::Status> left;
    Send(std::move(frame), [&](absl::Status s) { left.set_value(std::move(s)); });
    return left.get_future().get();
  }
  void Send(Frame&& frame, SentFn sent) override {
    std::lock_guard<std::mutex> lock(mu);
    sent_on = std::this_thread::get_id();
    held.push_back(std::move(sent));
    jobs.push_back(frame.header.job);
  }
  void Release(size_t n) {
    std::vector<SentFn> go;
    {
      std::lock_guard<std::mutex> lock(mu);
      go.assign(held.begin(), held.begin() + n);
      held.erase(held.begin(), held.begin() + n);
    }
    for (auto& sent : go) sent(status);
  }
  std::mutex mu;
  std::thread::id sent_on;
  std::vector<SentFn> held;
  std::vector<uint64_t> jobs;  // of every frame sent, in order
  absl::Status status;
};

Frame OfJob(uint64_t job) {
  Frame f;
  f.header.job = job;
  return f;
}

TEST(LinkSenderTest, AnUnpacedLinkSendsInTheSendersThreadWithoutWaitingForTheWire) {
  HeldFabric fabric;
  LinkSender link({9e10, 1e-6}, 0, fabric);
  EXPECT_TRUE(link.Enqueue(Frame{}));  // returns though the frame has not left
  EXPECT_EQ(fabric.sent_on, std::this_thread::get_id());
  EXPECT_EQ(fabric.held.size(), 1u);
  fabric.Release(1);
}

TEST(LinkSenderTest, AnUnpacedLinkWaitsOnceMaxQueuedFramesAreLeavingAndAnAbortEndsTheWait) {
  HeldFabric fabric;
  LinkSender link({9e10, 1e-6}, 0, fabric, /*max_queued=*/2);
  ASSERT_TRUE(link.Enqueue(Frame{}));
  ASSERT_TRUE(link.Enqueue(Frame{}));
  // A third waits for room: until one of the two has left...
  std::atomic<bool> third{false};
  std::thread sender([&] { third = link.Enqueue(Frame{}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(third);
  fabric.Release(1);
  sender.join();
  EXPECT_TRUE(third);
  // ...or until its job is aborted, the frame dropped.
  auto abort = std::make_shared<JobAbort>();
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    abort->Abort(absl::CancelledError("stop"));
  });
  EXPECT_FALSE(link.Enqueue(Frame{}, abort));
  aborter.join();
  EXPECT_EQ(fabric.held.size(), 2u);
  fabric.Release(2);
}

TEST(LinkSenderTest, TryEnqueueOnAFullLinkLeavesTheFrameWithTheCallerAndNeverWaits) {
  HeldFabric fabric;
  LinkSender link({9e10, 1e-6}, 0, fabric, /*max_queued=*/1);
  Frame first = OfJob(1), second = OfJob(2);
  second.payload.assign(3, 1.0f);
  ASSERT_TRUE(link.TryEnqueue(first));
  EXPECT_FALSE(link.TryEnqueue(second));
  EXPECT_EQ(second.payload.size(), 3u) << "the frame that did not fit is still the caller's";
  fabric.Release(1);
  EXPECT_TRUE(link.TryEnqueue(second));
  EXPECT_EQ(fabric.held.size(), 1u);
  fabric.Release(1);
}

TEST(LinkSenderTest, ACompletionAfterTheLinkIsGoneIsHarmless) {
  HeldFabric fabric;
  {
    LinkSender link({9e10, 1e-6}, 0, fabric);
    link.Enqueue(Frame{});
  }
  fabric.Release(1);  // a stream cancelled after the pod's links closed
}

TEST(LinkSenderTest, AFrameThatFailsAfterItsJobIsForgottenLeavesNoErrorBehind) {
  HeldFabric fabric;
  LinkSender link({9e10, 1e-6}, 0, fabric);
  ASSERT_TRUE(link.Enqueue(OfJob(7)));
  ASSERT_TRUE(link.Enqueue(OfJob(7)));
  fabric.status = absl::UnavailableError("the peer is gone");
  fabric.Release(1);
  EXPECT_FALSE(link.JobStatus(7).ok());
  link.ForgetJob(7);
  EXPECT_TRUE(link.JobStatus(7).ok());
  fabric.Release(1);  // the job's last frame fails late, as a cancelled stream's do
  EXPECT_TRUE(link.JobStatus(7).ok()) << "a forgotten job's late failure is kept";
  // The same number run again (a retry) records its own errors.
  ASSERT_TRUE(link.Enqueue(OfJob(7)));
  fabric.Release(1);
  EXPECT_FALSE(link.JobStatus(7).ok());
}

size_t Held(HeldFabric& fabric) {
  std::lock_guard<std::mutex> lock(fabric.mu);
  return fabric.held.size();
}

// Waits up to 5 s for `n` frames to have been handed to the fabric.
bool Holds(HeldFabric& fabric, size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (Held(fabric) < n) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// A cancelled job on a slow paced link once held the next job's frames for
// the rest of its paced time (minutes at 1/1000 of the bandwidth).
TEST(LinkSenderTest, AnAbortedJobsFramesNoLongerHoldAPacedLink) {
  HeldFabric fabric;
  LinkSender link({1e6, 1e-6}, 10, fabric);  // 1 MB/s, 10 wall seconds per emulated one
  auto aborted = std::make_shared<JobAbort>();
  Frame first = OfJob(1), queued = OfJob(1), next = OfJob(2);
  first.header.emu_bytes = queued.header.emu_bytes = 1000000;  // 10 s each on the wall
  next.header.emu_bytes = 1000;                                 // 10 ms
  ASSERT_TRUE(link.Enqueue(std::move(first), aborted));
  ASSERT_TRUE(Holds(fabric, 1));
  ASSERT_TRUE(link.Enqueue(std::move(queued), aborted));
  ASSERT_TRUE(link.Enqueue(std::move(next)));
  const auto t0 = std::chrono::steady_clock::now();
  aborted->Abort(absl::CancelledError("cancelled by the user"));
  // The frame under way is cut short, the aborted job's queued one dropped,
  // and the next job's leaves at once.
  ASSERT_TRUE(Holds(fabric, 2));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  {
    std::lock_guard<std::mutex> lock(fabric.mu);
    EXPECT_EQ(fabric.jobs, (std::vector<uint64_t>{1, 2})) << "the aborted job's queued frame was sent";
  }
  while (Held(fabric) > 0) fabric.Release(1);
}

TEST(LinkSenderTest, APacedLinkSendsInItsOwnThreadWithoutWaitingForTheWire) {
  HeldFabric fabric;
  LinkSender link({9e10, 1e-6}, 1000, fabric);
  link.Enqueue(Frame{});
  link.Enqueue(Frame{});
  EXPECT_TRUE(Holds(fabric, 2)) << "the second frame waited for the first to leave";
  EXPECT_NE(fabric.sent_on, std::this_thread::get_id());
  while (Held(fabric) > 0) fabric.Release(1);
}

TEST(LinkSenderTest, APacedLinkWhoseFramesNeverLeaveStillCloses) {
  HeldFabric fabric;  // a stopped peer: nothing leaves until the streams are cancelled
  auto link = std::make_unique<LinkSender>(LinkParams{9e10, 1e-6}, 1000, fabric);
  link->Enqueue(Frame{});
  ASSERT_TRUE(Holds(fabric, 1));
  // Closing joins the link's thread, which must not be waiting for the wire.
  std::atomic<bool> closed{false};
  std::thread closer([&] {
    link.reset();
    closed = true;
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!closed && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(closed) << "closing the link waited for a frame that cannot leave";
  while (Held(fabric) > 0) fabric.Release(1);  // lets a waiting close finish
  closer.join();
}

TEST(LinkSenderTest, AFailedSendIsItsJobsError) {
  HeldFabric fabric;
  fabric.status = absl::UnavailableError("peer gone");
  LinkSender link({9e10, 1e-6}, 0, fabric);
  link.Enqueue(OfJob(7));
  EXPECT_TRUE(link.JobStatus(7).ok());  // not left yet
  fabric.Release(1);
  EXPECT_EQ(link.JobStatus(7).code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(link.JobStatus(8).ok());
  link.ForgetJob(7);
  EXPECT_TRUE(link.JobStatus(7).ok());
}

}  // namespace
}  // namespace tpuemu
