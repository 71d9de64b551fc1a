// The process's matmul gate: at most its limit of multiplies at once, every
// waiter let in as the others leave, and every product the same with it;
// the CPUs a worker counts as its own by default.
#include "core/tensor/matmul_gate.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/tensor/gemm.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

using namespace std::chrono_literals;

// Waits (up to 10 s) until `n` callers are blocked in the gate.
bool AwaitWaiting(const MatmulGate& gate, int n) {
  for (auto end = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < end;) {
    if (gate.waiting() == n) return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

TEST(MatmulGateTest, NeverMoreInsideThanTheLimitAndTheLimitIsReached) {
  MatmulGate gate(2);
  std::atomic<int> inside{0}, most{0};
  std::vector<std::thread> chips;
  for (int c = 0; c < 6; ++c) {
    chips.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        const MatmulGate::Pass pass = gate.Enter();
        const int now = ++inside;
        for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
        }
        std::this_thread::sleep_for(200us);
        --inside;
      }
    });
  }
  for (std::thread& t : chips) t.join();
  EXPECT_EQ(most.load(), 2);
  EXPECT_EQ(gate.waiting(), 0);
}

TEST(MatmulGateTest, EveryWaiterGetsInAsTheOthersLeave) {
  MatmulGate gate(1);
  std::atomic<int> done{0};
  std::vector<std::thread> waiters;
  {
    const MatmulGate::Pass held = gate.Enter();
    for (int w = 0; w < 4; ++w) {
      waiters.emplace_back([&] {
        const MatmulGate::Pass pass = gate.Enter();
        ++done;
      });
    }
    EXPECT_TRUE(AwaitWaiting(gate, 4));
    EXPECT_EQ(done.load(), 0);
  }
  for (std::thread& t : waiters) t.join();
  EXPECT_EQ(done.load(), 4);
}

TEST(MatmulGateTest, AWideMultiplyWaitsForRoomAndCountsAtMostTheLimit) {
  MatmulGate gate(2);
  std::atomic<bool> wide_in{false};
  std::thread wide;
  {
    const MatmulGate::Pass one = gate.Enter();
    wide = std::thread([&] {
      const MatmulGate::Pass pass = gate.Enter(8);  // counts 2: the whole limit
      wide_in = true;
    });
    EXPECT_TRUE(AwaitWaiting(gate, 1));
    EXPECT_FALSE(wide_in.load());
  }
  wide.join();
  EXPECT_TRUE(wide_in.load());
  // Nothing is left counted: two single multiplies fit again.
  const MatmulGate::Pass a = gate.Enter(), b = gate.Enter();
  EXPECT_EQ(gate.waiting(), 0);
}

TEST(MatmulGateTest, AWideWaiterDoesNotKeepASingleOneAsleepWhenItFits) {
  MatmulGate gate(2);
  std::atomic<bool> single_in{false};
  std::thread wide, single;
  {
    const MatmulGate::Pass b = gate.Enter();
    {
      const MatmulGate::Pass a = gate.Enter();
      wide = std::thread([&] { const MatmulGate::Pass pass = gate.Enter(2); });
      EXPECT_TRUE(AwaitWaiting(gate, 1));
      single = std::thread([&] {
        const MatmulGate::Pass pass = gate.Enter();
        single_in = true;
      });
      EXPECT_TRUE(AwaitWaiting(gate, 2));
    }
    // a left: room for one, not for two.
    for (auto end = std::chrono::steady_clock::now() + 10s; !single_in && std::chrono::steady_clock::now() < end;) {
      std::this_thread::sleep_for(1ms);
    }
    EXPECT_TRUE(single_in.load());
  }
  single.join();
  wide.join();
}

TEST(MatmulGateTest, NoLimitLetsEveryoneIn) {
  MatmulGate gate(0);
  const MatmulGate::Pass a = gate.Enter(), b = gate.Enter(3), c = gate.Enter();
  EXPECT_EQ(gate.waiting(), 0);
}

TEST(MatmulGateTest, ChipsBehindTheProcessGateGetTheSameProducts) {
  const int64_t m = 300, k = 200, n = 250;
  std::vector<float> a(m * k), b(k * n), alone(m * n);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 11) * 0.37f - 1.5f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 13) * 0.21f - 1.1f;
  MatMul(a.data(), m, k, false, b.data(), k, n, false, alone.data());
  ProcessMatmulGate().set_limit(1);
  std::vector<std::vector<float>> gated(4, std::vector<float>(m * n));
  std::vector<std::thread> chips;
  for (auto& c : gated) {
    chips.emplace_back([&] {
      for (int i = 0; i < 3; ++i) MatMul(a.data(), m, k, false, b.data(), k, n, false, c.data());
    });
  }
  for (std::thread& t : chips) t.join();
  ProcessMatmulGate().set_limit(0);
  for (const auto& c : gated) EXPECT_EQ(c, alone);
}

class CgroupCpuLimitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / ("cgroup-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(root_ / "kubepods" / "pod1" / "worker");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void Write(const std::filesystem::path& file, const std::string& text) { std::ofstream(root_ / file) << text; }
  int Limit() { return CgroupCpuLimit((root_ / "self").string(), root_.string()); }

  std::filesystem::path root_;
};

TEST_F(CgroupCpuLimitTest, TheLeastQuotaOnThePathRoundedUp) {
  Write("self", "0::/kubepods/pod1/worker\n");
  Write("cpu.max", "max 100000\n");
  Write("kubepods/pod1/cpu.max", "250000 100000\n");  // 2.5 CPUs: 3 multiplies keep them busy
  Write("kubepods/pod1/worker/cpu.max", "max 100000\n");
  EXPECT_EQ(Limit(), 3);
  Write("kubepods/pod1/worker/cpu.max", "50000 100000\n");  // half a CPU: still one
  EXPECT_EQ(Limit(), 1);
}

TEST_F(CgroupCpuLimitTest, NoQuotaNoCgroupV2OrNoFilesMeanNoLimit) {
  Write("self", "0::/kubepods/pod1/worker\n");
  EXPECT_EQ(Limit(), 0);  // no cpu.max anywhere
  Write("kubepods/pod1/worker/cpu.max", "max 100000\n");
  EXPECT_EQ(Limit(), 0);
  Write("self", "4:memory:/x\n1:cpu:/\n");  // cgroup v1 only
  EXPECT_EQ(Limit(), 0);
  EXPECT_EQ(CgroupCpuLimit((root_ / "absent").string(), root_.string()), 0);
}

TEST(UsableCpusTest, AtLeastOneAndNoMoreThanTheMachineHas) {
  EXPECT_GE(UsableCpus(), 1);
  EXPECT_LE(UsableCpus(), static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace
}  // namespace tpuemu
