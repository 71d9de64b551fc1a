// BLIS's sub-configuration (issue 21): the choice from CPU features, the
// library's contents and BLIS_ARCH_TYPE; the exact self-test catching wrong
// products; the child process that survives a kernel's crash.
#include "core/tensor/blis_kernel.h"

#include <signal.h>

#include <cstdlib>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tpuemu {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Read before main, before EnsureBlisKernel may set it for this process.
const char* const kUserArchType = std::getenv("BLIS_ARCH_TYPE");

// BLIS 0.9's arch_t order, and Debian's x86_64 family build.
BlisLibrary Debian(const std::string& default_config) {
  return {{"skx", "knl", "knc", "haswell", "sandybridge", "penryn", "zen3", "zen2", "zen", "excavator",
           "steamroller", "piledriver", "bulldozer", "armsve", "a64fx", "firestorm", "thunderx2", "cortexa57",
           "cortexa53", "cortexa15", "cortexa9", "power10", "power9", "power7", "bgq", "generic"},
          {"skx", "knl", "haswell", "sandybridge", "penryn", "zen3", "zen2", "zen", "excavator", "steamroller",
           "piledriver", "bulldozer", "generic"},
          default_config};
}

CpuFeatures Avx2Cpu(bool amd, int family) {
  CpuFeatures c;
  c.amd = amd;
  c.family = family;
  c.ssse3 = c.avx = c.fma = c.avx2 = true;
  return c;
}

CpuFeatures Avx512Cpu(bool amd, int family) {
  CpuFeatures c = Avx2Cpu(amd, family);
  c.avx512f = c.avx512dq = c.avx512bw = c.avx512vl = true;
  return c;
}

TEST(BlisKernelPlan, Zen5WithGenericDefaultGetsSkxThenTheAvx2Sets) {
  const KernelPlan p = PlanBlisKernel(Avx512Cpu(true, 0x1a), Debian("generic"), std::nullopt);
  EXPECT_FALSE(p.user);
  EXPECT_THAT(p.candidates, ElementsAre("skx", "zen3", "zen2", "zen", "haswell", "sandybridge", "penryn"));
  EXPECT_THAT(p.why, HasSubstr("'generic'"));
}

TEST(BlisKernelPlan, Avx2CpusGetTheirVendorsSets) {
  // An AMD without AVX-512 (or with it off) that BLIS does not know: zen3 first.
  EXPECT_THAT(PlanBlisKernel(Avx2Cpu(true, 0x1a), Debian("generic"), std::nullopt).candidates,
              ElementsAre("zen3", "zen2", "zen", "haswell", "sandybridge", "penryn"));
  // Intel's AVX2 parts: haswell, never a zen set.
  EXPECT_THAT(PlanBlisKernel(Avx2Cpu(false, 6), Debian("generic"), std::nullopt).candidates,
              ElementsAre("haswell", "sandybridge", "penryn"));
}

TEST(BlisKernelPlan, BlisOwnPickStaysWithinItsTier) {
  EXPECT_THAT(PlanBlisKernel(Avx512Cpu(false, 6), Debian("skx"), std::nullopt).candidates, IsEmpty());
  EXPECT_THAT(PlanBlisKernel(Avx2Cpu(false, 6), Debian("haswell"), std::nullopt).candidates, IsEmpty());
  EXPECT_THAT(PlanBlisKernel(Avx2Cpu(true, 0x17), Debian("zen2"), std::nullopt).candidates, IsEmpty());
  // Zen 4: BLIS 0.9 says zen3 (AVX2); the CPU has AVX-512, a higher tier.
  EXPECT_THAT(PlanBlisKernel(Avx512Cpu(true, 0x19), Debian("zen3"), std::nullopt).candidates, ElementsAre("skx"));
}

TEST(BlisKernelPlan, OnlySubConfigurationsTheLibraryHas) {
  BlisLibrary lib = Debian("generic");
  lib.built = {"haswell", "generic"};  // an intel64-like build
  EXPECT_THAT(PlanBlisKernel(Avx512Cpu(true, 0x1a), lib, std::nullopt).candidates, ElementsAre("haswell"));
  EXPECT_THAT(PlanBlisKernel(CpuFeatures{}, Debian("generic"), std::nullopt).candidates, IsEmpty());
}

TEST(BlisKernelPlan, UnknownDefaultLeavesBlisAlone) {
  EXPECT_THAT(PlanBlisKernel(Avx512Cpu(true, 0x1a), Debian(""), std::nullopt).candidates, IsEmpty());
}

TEST(BlisKernelPlan, UserSettingWinsAndIsReadAsBlisReadsIt) {
  const BlisLibrary lib = Debian("");
  const KernelPlan p = PlanBlisKernel(Avx512Cpu(true, 0x1a), lib, "3");
  EXPECT_TRUE(p.user);
  EXPECT_THAT(p.candidates, IsEmpty());
  EXPECT_THAT(p.why, HasSubstr("'haswell'"));
  // BLIS 0.9 reads it with strtol: a name is 0, skx, whatever the name.
  EXPECT_THAT(DescribeArchType("haswell", lib), HasSubstr("not a number, which BLIS 0.9 reads as 0, 'skx'"));
  EXPECT_THAT(DescribeArchType("2", lib), HasSubstr("'knc', which this library does not contain: BLIS aborts"));
  EXPECT_THAT(DescribeArchType("26", lib), HasSubstr("out of range"));
  EXPECT_THAT(DescribeArchType("-1", lib), HasSubstr("unset"));
  EXPECT_EQ(ArchId(lib, "generic"), 25);
}

void Naive(const MatrixView& a, const MatrixView& b, const MutableMatrixView& c) {
  for (int64_t i = 0; i < c.rows; ++i)
    for (int64_t j = 0; j < c.cols; ++j) {
      float s = 0;
      for (int64_t p = 0; p < a.cols; ++p) s += a.data[i * a.rs + p * a.cs] * b.data[p * b.rs + j * b.cs];
      c.data[i * c.rs + j * c.cs] = s;
    }
}

TEST(BlisKernelSelfTest, PassesCorrectProducts) {
  EXPECT_TRUE(CheckSgemm(Naive).ok());
  EXPECT_TRUE(CheckSgemm(Gemm).ok());  // BLIS with the chosen kernels
}

TEST(BlisKernelSelfTest, CatchesWrongProducts) {
  // One element off by one, in the last edge tile of the first product.
  const absl::Status off = CheckSgemm([](const MatrixView& a, const MatrixView& b, const MutableMatrixView& c) {
    Naive(a, b, c);
    c.data[(c.rows - 1) * c.rs + (c.cols - 1) * c.cs] += 1;
  });
  EXPECT_THAT(off.message(), HasSubstr("210x205x1030 sgemm (A row-major, B column-major, C row-major): c[209][204]"));
  // Strides ignored (everything read as row-major): B is column-major.
  const absl::Status strides = CheckSgemm([](const MatrixView& a, const MatrixView& b, const MutableMatrixView& c) {
    Naive({a.data, a.rows, a.cols, a.cols, 1}, {b.data, b.rows, b.cols, b.cols, 1},
          {c.data, c.rows, c.cols, c.cols, 1});
  });
  EXPECT_THAT(strides.message(), HasSubstr("210x205x1030"));
  // A kernel that stops after the first k block (the last one leaves C unwritten: NaN).
  const absl::Status short_k = CheckSgemm([](const MatrixView& a, const MatrixView& b, const MutableMatrixView& c) {
    Naive({a.data, a.rows, 256, a.rs, a.cs}, {b.data, 256, b.cols, b.rs, b.cs}, c);
  });
  EXPECT_FALSE(short_k.ok());
  // C left as it was: NaN must not pass.
  EXPECT_THAT(CheckSgemm([](const MatrixView&, const MatrixView&, const MutableMatrixView&) {}).message(),
              HasSubstr("= nan"));
}

TEST(BlisKernelChild, ReturnsTheValueOrTheFailure) {
  EXPECT_EQ(*RunInChild([]() -> absl::StatusOr<std::string> { return "skx"; }), "skx");
  const auto failed = RunInChild([]() -> absl::StatusOr<std::string> { return absl::InternalError("wrong product"); });
  EXPECT_THAT(failed.status().message(), HasSubstr("wrong product"));
  // A kernel with instructions the CPU lacks: the child dies, this process goes on.
  const auto ill = RunInChild([]() -> absl::StatusOr<std::string> {
    std::fputs("what the child said", stderr);
    raise(SIGILL);
    return "unreachable";
  });
  EXPECT_THAT(ill.status().message(), HasSubstr("signal 4"));
  EXPECT_THAT(ill.status().message(), HasSubstr("what the child said"));
  const auto hung = RunInChild([]() -> absl::StatusOr<std::string> { pause(); return ""; }, 0.2);
  EXPECT_EQ(hung.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(BlisKernelChoice, ThisProcessRunsTheBestSubConfigurationItCan) {
  const std::string& used = EnsureBlisKernel();
  EXPECT_EQ(&used, &EnsureBlisKernel());  // chosen once per process
  if (kUserArchType) GTEST_SKIP() << "BLIS_ARCH_TYPE=" << kUserArchType << " set by the user";
  const CpuFeatures cpu = DetectCpuFeatures();
  const BlisLibrary lib = LinkedBlis();
  const std::vector<std::string> runnable = RunnableConfigs(cpu, lib.built);
  if (runnable.empty()) GTEST_SKIP() << "no SIMD sub-configuration for " << DescribeCpu(cpu);
  EXPECT_THAT(runnable, Contains(used));  // never 'generic' where something better runs
  if (runnable.front() == "skx") {
    EXPECT_EQ(used, "skx");
  }
}

}  // namespace
}  // namespace tpuemu
