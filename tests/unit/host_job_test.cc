// A chip's thread that runs out of memory must not end the process (an
// exception that leaves a std::thread calls std::terminate): it fails the
// job, and the job's other chips stop waiting for it at once.
#include "core/host/job.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <new>

#include "core/job/inprocess_pod.h"
#include "core/wire/run_number.h"

namespace tpuemu {
namespace {

using ::testing::HasSubstr;

TEST(HostJobTest, AnExceptionOnAChipsThreadReachesTheCaller) {
  EXPECT_THROW(OnThreads(3, [](size_t i) {
                 if (i == 1) throw std::bad_alloc();
               }),
               std::bad_alloc);
}

TEST(HostJobTest, AChipThatRunsOutOfMemoryFailsTheJobAndItsPeersStopWaiting) {
  auto topo = Topology::Create({"v5p:4", 1, 4, "auto"});
  ASSERT_TRUE(topo.ok());
  InProcessPod pod(*topo, 0);
  HostNetwork& net = pod.network();
  const uint64_t run = RunNumber(9, 0);
  net.mailbox().OpenJob(run, 1 << 20);
  RunOptions options;
  options.job = run;
  const auto start = std::chrono::steady_clock::now();
  auto result = RunChips(
      net, options, 4,
      [&](size_t i) -> absl::Status {
        if (i == 2) throw std::bad_alloc();
        return net.mailbox().Take(run, static_cast<int>(i), 2, 0, absl::Seconds(60)).status();  // never sent
      },
      [](size_t) -> absl::StatusOr<ChipRunResult> { return ChipRunResult{}; });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted) << result.status();
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("chip 2 ran out of host memory while running job-9"));
}

}  // namespace
}  // namespace tpuemu
