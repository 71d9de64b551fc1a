// The gRPC fabric's streams, written without waiting: every frame handed over
// is told whether it left, in order, whatever the peer does meanwhile.
#include "services/grpc_fabric.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/peer_service.h"
#include "services/server.h"

namespace tpuemu {
namespace {

// A peer worker's PeerService in this process, and a fabric of host 0
// sending to its chip 1 over loopback.
class GrpcFabricTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = StartServer("127.0.0.1:0", {}, ServerPeers::kMembersOnly, &peer_);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    fabric_ = std::make_unique<GrpcFabric>(topo_, 0, std::map<int, std::string>{{1, absl::StrCat("127.0.0.1:", server_.port)}}, peer_.queue());
    ASSERT_TRUE(fabric_->Connect(mailbox_, {0}, {}, absl::Seconds(5)).ok());
  }
  void TearDown() override {
    fabric_.reset();
    if (server_.server) server_.server->Shutdown(std::chrono::system_clock::now());
  }

  Frame Numbered(uint64_t tag, size_t floats = 1 << 16) {
    Frame f;
    f.header.src_chip = 0;
    f.header.dst_chip = 1;
    f.header.tag = tag;
    f.payload.assign(floats, static_cast<float>(tag));
    return f;
  }
  // Sends n frames without waiting; returns their outcomes once all are known.
  std::vector<absl::Status> SendAll(uint64_t first, int n) {
    std::mutex mu;
    std::vector<absl::Status> outcomes;
    for (int i = 0; i < n; ++i) {
      fabric_->Send(Numbered(first + i), [&](absl::Status s) {
        std::lock_guard<std::mutex> lock(mu);
        outcomes.push_back(std::move(s));
      });
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (static_cast<int>(outcomes.size()) == n) return outcomes;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ADD_FAILURE() << "not every frame was told whether it left";
    std::lock_guard<std::mutex> lock(mu);
    return outcomes;
  }

  Topology topo_ = *Topology::Create({"v5p:2", 1, 1, "none"});  // two hosts of one chip
  std::mutex mu_;
  std::vector<uint64_t> received_;  // tags, in arrival order
  std::function<void()> on_frame_;  // run in the peer queue's thread as each frame arrives
  PeerServiceImpl peer_{[this](Frame&& f) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      received_.push_back(f.header.tag);
    }
    if (on_frame_) on_frame_();
  }};
  RunningServer server_;
  Mailbox mailbox_;
  std::unique_ptr<GrpcFabric> fabric_;
};

TEST_F(GrpcFabricTest, FramesHandedOverWithoutWaitingAllLeaveAndArriveInOrder) {
  const std::vector<absl::Status> outcomes = SendAll(0, 64);
  for (const absl::Status& s : outcomes) EXPECT_TRUE(s.ok()) << s;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (received_.size() == 64) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::lock_guard<std::mutex> lock(mu_);
  ASSERT_EQ(received_.size(), 64u);
  for (uint64_t i = 0; i < 64; ++i) EXPECT_EQ(received_[i], i);
}

TEST_F(GrpcFabricTest, AfterThePeerIsGoneEveryFrameIsToldItCouldNotLeaveNamingTheLink) {
  ASSERT_TRUE(fabric_->Deliver(Numbered(0)).ok());
  server_.server->Shutdown(std::chrono::system_clock::now());
  server_.server.reset();
  // The first writes after the peer went may still reach the socket; within
  // a few rounds the stream is known broken, and then every frame fails at once.
  absl::Status last;
  for (int round = 0; round < 50 && last.ok(); ++round) {
    for (const absl::Status& s : SendAll(100 * round, 8)) {
      if (!s.ok()) last = s;
    }
  }
  ASSERT_FALSE(last.ok()) << "writes to a peer that is gone kept succeeding";
  EXPECT_EQ(last.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(last.message().find("link chip 0 -> chip 1"), std::string::npos) << last;
  for (const absl::Status& s : SendAll(10000, 4)) EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  // Closing the links ends the broken stream, which frees itself.
  fabric_->Disconnect();
}

// A frame the peer refuses (past its 8 MiB messages) breaks its stream with
// the connection still up: its job fails on this host at once, not after
// the receive timeout, and the frames after it go on a new stream (they
// waited out two minutes each, job after job).
TEST_F(GrpcFabricTest, AFrameThePeerRefusesAbortsItsJobAndTheNextFramesGoOnANewStream) {
  constexpr uint64_t kJob = 7;
  mailbox_.OpenJob(kJob, uint64_t{1} << 30);
  Frame big = Numbered(1000, (9 << 20) / sizeof(float));
  big.header.job = kJob;
  ASSERT_FALSE(fabric_->Deliver(std::move(big)).ok());
  const auto started = std::chrono::steady_clock::now();
  auto waited = mailbox_.Take(kJob, 0, 1, 1, absl::Seconds(60));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  ASSERT_FALSE(waited.ok());
  EXPECT_EQ(waited.status().code(), absl::StatusCode::kAborted) << waited.status();
  EXPECT_NE(waited.status().message().find("link chip 0 -> chip 1"), std::string::npos) << waited.status();
  for (const absl::Status& s : SendAll(0, 8)) EXPECT_TRUE(s.ok()) << s;
}

TEST_F(GrpcFabricTest, AFabricLetGoOfInThePeerQueuesOwnThreadClosesWithoutWaitingForIt) {
  // A worker's last hold on a replaced pod can go where a frame is
  // delivered: the fabric then closes in the queue's thread, with a write
  // still in flight that only that thread would complete. It must not wait.
  // Shared with the hook, which frames left in flight may still call after
  // this body has returned.
  struct Closing {
    std::unique_ptr<GrpcFabric> fabric;
    std::atomic<bool> all_sent{false}, closed{false};
    std::atomic<int64_t> close_ms{-1};
  };
  auto closing = std::make_shared<Closing>();
  closing->fabric = std::move(fabric_);
  on_frame_ = [closing] {
    if (closing->closed) return;
    while (!closing->all_sent) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const auto t0 = std::chrono::steady_clock::now();
    closing->fabric.reset();
    closing->close_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    closing->closed = true;
  };
  for (int i = 0; i < 64; ++i) closing->fabric->Send(Numbered(i, 1 << 18), [](absl::Status) {});  // 1 MiB each
  closing->all_sent = true;
  for (int i = 0; i < 2000 && !closing->closed; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(closing->closed);
  EXPECT_LT(closing->close_ms, 1000) << "the queue's thread waited for itself";
}

TEST_F(GrpcFabricTest, LinksRetiredAsThePeerMovesAreFreedOnceEndedNotKeptUntilTheFabricIsIdle) {
  for (int i = 0; i < 12; ++i) {
    // The same server by one name, then by another: to the fabric, a host that moved.
    fabric_->UpdatePeers({{1, absl::StrCat(i % 2 == 1 ? "localhost:" : "127.0.0.1:", server_.port)}});
    const std::vector<absl::Status> sent = SendAll(100 * i, 1);  // a new link, to the new address
    ASSERT_EQ(sent.size(), 1u);
    ASSERT_TRUE(sent[0].ok()) << sent[0];
  }
  EXPECT_LE(fabric_->retired_links(), 1u);
}

TEST_F(GrpcFabricTest, FramesForChipsOnThisHostGoToItsMailboxAndLeaveAtOnce) {
  Topology one_host = *Topology::Create({"v5p:2", 1, 2, "none"});
  GrpcFabric local(one_host, 0, {}, peer_.queue());
  Mailbox mailbox;
  ASSERT_TRUE(local.Connect(mailbox, {0, 1}, {}, absl::Seconds(1)).ok());
  mailbox.OpenJob(7, 1 << 20);
  Frame f = Numbered(3, 4);
  f.header.job = 7;
  bool left = false;
  local.Send(std::move(f), [&](absl::Status s) { left = s.ok(); });
  EXPECT_TRUE(left);  // told before Send returned
  auto got = mailbox.Take(7, 1, 0, 3, absl::Seconds(1));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->elements(), 4u);
}

TEST_F(GrpcFabricTest, ALinkThatCannotConnectSaysWhy) {
  // A port that was just free, so nothing listens there.
  auto probe = StartServer("127.0.0.1:0", {}, ServerPeers::kMembersOnly);
  ASSERT_TRUE(probe.ok()) << probe.status();
  const int closed_port = probe->port;
  probe->server->Shutdown(std::chrono::system_clock::now());
  GrpcFabric fabric(topo_, 0, {{1, absl::StrCat("127.0.0.1:", closed_port)}}, peer_.queue());
  Mailbox mailbox;
  const absl::Status s = fabric.Connect(mailbox, {0}, {}, absl::Milliseconds(300));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find(absl::StrCat("cannot connect link chip 0 -> chip 1 (worker host 1 at 127.0.0.1:", closed_port,
                                          ") within 300ms (the connection is ")),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find("Connection refused"), std::string::npos) << s;
}

}  // namespace
}  // namespace tpuemu
