// Which of BLIS's sub-configurations (kernel sets) this process multiplies
// with (issue 21). Debian's BLIS 0.9 is the x86_64 family build: it holds
// skx, haswell, zen3 and others and picks one at its first call from cpuid,
// but it knows no CPU newer than 2021 (an AMD family 0x1a, Zen 5, gets
// 'generic': ~35 GFLOP/s per core where 'skx' gives ~190). So before the first
// BLIS call we pick the best sub-configuration the CPU can run, check it with
// an exact product in a child process, and hand it to BLIS through
// BLIS_ARCH_TYPE, which BLIS 0.9 reads once, at its first call, as an arch_t
// number (strtol: "skx" or "haswell" read as 0, skx; -1 counts as unset; an id
// out of range or of a sub-configuration not built makes BLIS abort).
// A BLIS_ARCH_TYPE already in the environment is respected.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor/gemm.h"

namespace tpuemu {

// What the kernel sets need of the CPU (and of the OS: AVX and AVX-512 count
// only if it saves their registers).
struct CpuFeatures {
  bool amd = false;
  int family = 0;  // cpuid's family, extended family included (0x19 Zen 3/4, 0x1a Zen 5)
  bool ssse3 = false, avx = false, fma = false, avx2 = false;
  bool avx512f = false, avx512dq = false, avx512bw = false, avx512vl = false;
};
CpuFeatures DetectCpuFeatures();
std::string DescribeCpu(const CpuFeatures& cpu);

// The library as BLIS numbers and builds it.
struct BlisLibrary {
  std::vector<std::string> arch_names;  // bli_arch_string(id), index = arch_t id
  std::vector<std::string> built;       // sub-configurations compiled in
  std::string default_config;           // BLIS's own pick on this CPU; empty: unknown
};
// arch_names and built of the linked BLIS; default_config left empty.
BlisLibrary LinkedBlis();
int ArchId(const BlisLibrary& lib, const std::string& name);  // -1 if unknown

// The sub-configurations of `built` that this CPU can run, fastest first.
std::vector<std::string> RunnableConfigs(const CpuFeatures& cpu, const std::vector<std::string>& built);

// What BLIS 0.9 makes of a BLIS_ARCH_TYPE value, in words.
std::string DescribeArchType(const std::string& value, const BlisLibrary& lib);

struct KernelPlan {
  bool user = false;                   // BLIS_ARCH_TYPE was already set: left alone
  std::vector<std::string> candidates;  // to self-test in turn; empty: BLIS's own pick stays
  std::string why;
};
// The choice itself, a pure function. BLIS's own pick is replaced only by a
// sub-configuration of a higher instruction-set tier (AVX-512 > AVX2/FMA >
// AVX > SSSE3 > generic): within a tier BLIS's cpuid tables know better.
KernelPlan PlanBlisKernel(const CpuFeatures& cpu, const BlisLibrary& lib,
                          const std::optional<std::string>& user_arch_type);

// c = a * b by `gemm` on products of small integers (exact in float whatever
// the summation order), element by element against a naive triple loop: one
// product through BLIS's native kernels, one through its small-matrix ones,
// both with k past a cache block, mixed row- and column-major operands, and C
// prefilled with NaN (beta = 0 must not read it).
using GemmFn = std::function<void(const MatrixView&, const MatrixView&, const MutableMatrixView&)>;
absl::Status CheckSgemm(const GemmFn& gemm);

// Runs fn in a fork()ed child and returns its value; a child that fails,
// dies (SIGILL from instructions the CPU lacks, BLIS's abort) or hangs past
// timeout_s is an error carrying what it wrote to stderr.
absl::StatusOr<std::string> RunInChild(const std::function<absl::StatusOr<std::string>()>& fn,
                                       double timeout_s = 60);

// BLIS's own pick on this CPU, learnt in a child (asking in this process
// would fix BLIS's choice for good). Right only before this process's first
// BLIS call: a child inherits an initialised BLIS.
absl::StatusOr<std::string> QueryBlisDefault();

// Chooses once per process (later calls return at once), logs the choice to
// stderr, and returns the sub-configuration BLIS now uses. Gemm calls it
// before its first BLIS call; other direct BLIS users must call it first.
const std::string& EnsureBlisKernel();

}  // namespace tpuemu
