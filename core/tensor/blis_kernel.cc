#include "core/tensor/blis_kernel.h"

#include <blis.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace tpuemu {
namespace {

// Instruction-set tiers: a sub-configuration replaces BLIS's own pick only
// from a higher tier. Names not listed (generic, other CPUs') are tier 0.
int Tier(const std::string& name) {
  static const std::map<std::string, int> kTier = {
      {"skx", 4}, {"knl", 4},                                                       // AVX-512
      {"zen3", 3}, {"zen2", 3}, {"zen", 3}, {"haswell", 3}, {"excavator", 3},       // AVX2 and FMA
      {"sandybridge", 2}, {"steamroller", 2}, {"piledriver", 2}, {"bulldozer", 2},  // AVX
      {"penryn", 1}};                                                               // SSSE3
  const auto it = kTier.find(name);
  return it == kTier.end() ? 0 : it->second;
}

bool Avx2Fma(const CpuFeatures& c) { return c.avx && c.avx2 && c.fma; }

// Candidates fastest first, with what their kernels need. zen* differ from
// haswell in block sizes tuned to AMD's caches, hence AMD first; knl needs
// AVX-512 PF/ER and the bulldozer family FMA4, so BLIS's own cpuid picks them.
struct Candidate {
  const char* name;
  bool (*runs)(const CpuFeatures&);
};
const Candidate kCandidates[] = {
    {"skx", [](const CpuFeatures& c) { return Avx2Fma(c) && c.avx512f && c.avx512dq && c.avx512bw && c.avx512vl; }},
    {"zen3", [](const CpuFeatures& c) { return Avx2Fma(c) && c.amd && c.family >= 0x19; }},
    {"zen2", [](const CpuFeatures& c) { return Avx2Fma(c) && c.amd && c.family >= 0x17; }},
    {"zen", [](const CpuFeatures& c) { return Avx2Fma(c) && c.amd && c.family >= 0x17; }},
    {"haswell", Avx2Fma},
    {"sandybridge", [](const CpuFeatures& c) { return c.avx; }},
    {"penryn", [](const CpuFeatures& c) { return c.ssse3; }},
};

std::shared_ptr<spdlog::logger> Logger() {
  // stderr, not the default logger's stdout: the CLI prints --json there.
  auto log = std::make_shared<spdlog::logger>("blis", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  log->set_level(spdlog::get_level());
  return log;
}

// In a child: BLIS under BLIS_ARCH_TYPE=value (unset if none), optionally
// the self-test; returns the sub-configuration BLIS took there, which must
// be `want` if given (it is not if this process had initialised BLIS).
absl::StatusOr<std::string> ProbeInChild(const std::optional<std::string>& value, bool self_test,
                                         const std::string& want = "") {
  return RunInChild([&]() -> absl::StatusOr<std::string> {
    // The child's own environment: one thread, so setenv is safe here. No
    // BLIS_ARCH_DEBUG: its output should show this process's one choice.
    unsetenv("BLIS_ARCH_DEBUG");
    if (value) setenv("BLIS_ARCH_TYPE", value->c_str(), 1);
    else unsetenv("BLIS_ARCH_TYPE");
    bli_init();  // before bli_arch_query_id: with BLIS_ARCH_TYPE set, it aborts on an uninitialised BLIS
    const std::string got = bli_arch_string(bli_arch_query_id());
    if (!want.empty() && got != want) {
      return absl::FailedPreconditionError(absl::StrCat("BLIS took '", got, "' (initialised before?)"));
    }
    if (self_test) {
      if (absl::Status s = CheckSgemm(BlisGemm); !s.ok()) return absl::InternalError(absl::StrCat(got, ": ", s.message()));
    }
    return got;
  });
}

void WriteAll(int fd, const std::string& s) {
  for (size_t done = 0; done < s.size();) {
    const ssize_t n = write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += n;
  }
}

}  // namespace

CpuFeatures DetectCpuFeatures() {
  CpuFeatures c;
#if defined(__x86_64__) || defined(__i386__)
  // __builtin_cpu_supports counts AVX and AVX-512 only if the OS saves their
  // registers (XCR0), as BLIS's own cpuid does.
  __builtin_cpu_init();
  c.amd = __builtin_cpu_is("amd");
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
    const int base = (eax >> 8) & 0xf;
    c.family = base == 0xf ? base + static_cast<int>((eax >> 20) & 0xff) : base;
  }
  c.ssse3 = __builtin_cpu_supports("ssse3");
  c.avx = __builtin_cpu_supports("avx");
  c.fma = __builtin_cpu_supports("fma");
  c.avx2 = __builtin_cpu_supports("avx2");
  c.avx512f = __builtin_cpu_supports("avx512f");
  c.avx512dq = __builtin_cpu_supports("avx512dq");
  c.avx512bw = __builtin_cpu_supports("avx512bw");
  c.avx512vl = __builtin_cpu_supports("avx512vl");
#endif
  return c;
}

std::string DescribeCpu(const CpuFeatures& c) {
  std::vector<std::string> has;
  if (c.avx512f && c.avx512dq && c.avx512bw && c.avx512vl) has.push_back("AVX-512 F/DQ/BW/VL");
  else if (c.avx512f) has.push_back("AVX-512F (not all of DQ/BW/VL)");
  if (c.avx2) has.push_back("AVX2");
  if (c.fma) has.push_back("FMA");
  if (c.avx && !c.avx2) has.push_back("AVX");
  if (has.empty() && c.ssse3) has.push_back("SSSE3");
  return absl::StrFormat("%s family 0x%x with %s", c.amd ? "AMD" : "CPU", c.family,
                         has.empty() ? "no SIMD BLIS uses" : absl::StrJoin(has, ", "));
}

BlisLibrary LinkedBlis() {
  BlisLibrary lib;
  for (int id = 0; id < BLIS_NUM_ARCHS; ++id) lib.arch_names.push_back(bli_arch_string(static_cast<arch_t>(id)));
  // The sub-configurations compiled in, from the library's own header (the
  // library exports no way to ask; a mismatch would fail the self-test).
  lib.built = {
#ifdef BLIS_CONFIG_SKX
      "skx",
#endif
#ifdef BLIS_CONFIG_KNL
      "knl",
#endif
#ifdef BLIS_CONFIG_KNC
      "knc",
#endif
#ifdef BLIS_CONFIG_HASWELL
      "haswell",
#endif
#ifdef BLIS_CONFIG_SANDYBRIDGE
      "sandybridge",
#endif
#ifdef BLIS_CONFIG_PENRYN
      "penryn",
#endif
#ifdef BLIS_CONFIG_ZEN3
      "zen3",
#endif
#ifdef BLIS_CONFIG_ZEN2
      "zen2",
#endif
#ifdef BLIS_CONFIG_ZEN
      "zen",
#endif
#ifdef BLIS_CONFIG_EXCAVATOR
      "excavator",
#endif
#ifdef BLIS_CONFIG_STEAMROLLER
      "steamroller",
#endif
#ifdef BLIS_CONFIG_PILEDRIVER
      "piledriver",
#endif
#ifdef BLIS_CONFIG_BULLDOZER
      "bulldozer",
#endif
#ifdef BLIS_CONFIG_GENERIC
      "generic",
#endif
  };
  return lib;
}

int ArchId(const BlisLibrary& lib, const std::string& name) {
  for (size_t id = 0; id < lib.arch_names.size(); ++id) {
    if (lib.arch_names[id] == name) return static_cast<int>(id);
  }
  return -1;
}

std::vector<std::string> RunnableConfigs(const CpuFeatures& cpu, const std::vector<std::string>& built) {
  std::vector<std::string> out;
  for (const Candidate& c : kCandidates) {
    if (c.runs(cpu) && std::find(built.begin(), built.end(), c.name) != built.end()) out.push_back(c.name);
  }
  return out;
}

std::string DescribeArchType(const std::string& value, const BlisLibrary& lib) {
  // BLIS 0.9's bli_env_get_var: strtol(value, NULL, 10), no check of what follows.
  char* end = nullptr;
  const long id = std::strtol(value.c_str(), &end, 10);
  const std::string read = end == value.c_str() ? "not a number, which BLIS 0.9 reads as 0" : absl::StrCat("id ", id);
  if (id == -1) return "id -1, which BLIS reads as unset: BLIS picks by itself";
  if (id < 0 || id >= static_cast<long>(lib.arch_names.size())) {
    return absl::StrCat(read, ", out of range [0, ", lib.arch_names.size(), "): BLIS aborts at its first call");
  }
  const std::string& name = lib.arch_names[id];
  if (std::find(lib.built.begin(), lib.built.end(), name) == lib.built.end()) {
    return absl::StrCat(read, ", '", name, "', which this library does not contain: BLIS aborts at its first call");
  }
  return absl::StrCat(read, ", '", name, "'");
}

KernelPlan PlanBlisKernel(const CpuFeatures& cpu, const BlisLibrary& lib,
                          const std::optional<std::string>& user_arch_type) {
  KernelPlan plan;
  if (user_arch_type) {
    plan.user = true;
    plan.why = absl::StrCat("BLIS_ARCH_TYPE=", *user_arch_type,
                            " was already set (by the user or a parent process), left as it is: ",
                            DescribeArchType(*user_arch_type, lib));
    return plan;
  }
  if (lib.default_config.empty()) {
    plan.why = "BLIS's own pick could not be learnt, so it is left to BLIS";
    return plan;
  }
  for (const std::string& name : RunnableConfigs(cpu, lib.built)) {
    if (Tier(name) > Tier(lib.default_config)) plan.candidates.push_back(name);
  }
  plan.why = plan.candidates.empty()
                 ? absl::StrCat("BLIS's own pick, the best this library has for ", DescribeCpu(cpu))
                 : absl::StrCat("BLIS by itself picks '", lib.default_config, "' for ", DescribeCpu(cpu));
  return plan;
}

absl::Status CheckSgemm(const GemmFn& gemm) {
  // The first product has every dimension >= 201, so it runs BLIS's native
  // kernels (haswell and the zen sets send a product with any dimension
  // under 201 to their small-matrix kernels, which the second one runs).
  // k = 1030 crosses every candidate's KC (zen's is 1024): C accumulates over
  // k blocks. m and n are multiples of no micro-tile, so edge tiles run too.
  // Entries in [-3, 3]: |sums| <= 9 k < 2^24, exact in float in any order.
  struct Case {
    int64_t m, n, k;
    bool a_col, b_col, c_col;  // column-major (else row-major)
  };
  for (const Case& t : {Case{210, 205, 1030, false, true, false}, Case{40, 30, 1030, true, false, true}}) {
    const int64_t m = t.m, n = t.n, k = t.k;
    std::vector<float> a(m * k), b(k * n), c(m * n, std::numeric_limits<float>::quiet_NaN()), want(m * n, 0);
    const MatrixView va{a.data(), m, k, t.a_col ? 1 : k, t.a_col ? m : 1};
    const MatrixView vb{b.data(), k, n, t.b_col ? 1 : n, t.b_col ? k : 1};
    const MutableMatrixView vc{c.data(), m, n, t.c_col ? 1 : n, t.c_col ? m : 1};
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p) a[i * va.rs + p * va.cs] = static_cast<float>((i * 7 + p * 3) % 7 - 3);
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) b[p * vb.rs + j * vb.cs] = static_cast<float>((p * 7 + j * 5) % 7 - 3);
    // The naive triple loop, in the order that reads want and b's rows in line.
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p)
        for (int64_t j = 0; j < n; ++j) want[i * n + j] += a[i * va.rs + p * va.cs] * b[p * vb.rs + j * vb.cs];
    gemm(va, vb, vc);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const float got = c[i * vc.rs + j * vc.cs];
        if (!(got == want[i * n + j])) {
          auto major = [](bool col) { return col ? "column-major" : "row-major"; };
          return absl::InternalError(absl::StrFormat("%dx%dx%d sgemm (A %s, B %s, C %s): c[%d][%d] = %g, want %g", m,
                                                     n, k, major(t.a_col), major(t.b_col), major(t.c_col), i, j, got,
                                                     want[i * n + j]));
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> RunInChild(const std::function<absl::StatusOr<std::string>()>& fn, double timeout_s) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(fds[0]);
    close(fds[1]);
    return absl::UnavailableError(absl::StrCat("fork: ", std::strerror(err)));
  }
  if (pid == 0) {
    // The child's stderr is the pipe, so an abort message from BLIS comes back
    // too; _exit, so that nothing of the parent's (atexit, stdio) runs twice.
    dup2(fds[1], STDERR_FILENO);
    const absl::StatusOr<std::string> r = fn();
    WriteAll(STDERR_FILENO, r.ok() ? *r : std::string(r.status().message()));
    _exit(r.ok() ? 0 : 1);
  }
  close(fds[1]);
  std::string text;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // re-checks the deadline
    char buf[4096];
    const ssize_t got = read(fds[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // EOF: the child is done
    text.append(buf, got);
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return absl::DeadlineExceededError(absl::StrCat("child timed out after ", timeout_s, " s: ", text));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return text;
  if (WIFSIGNALED(status)) {
    return absl::InternalError(absl::StrCat("child killed by signal ", WTERMSIG(status), " (",
                                            strsignal(WTERMSIG(status)), ")", text.empty() ? "" : ": ", text));
  }
  return absl::InternalError(text.empty() ? absl::StrCat("child exited with ", WEXITSTATUS(status)) : text);
}

absl::StatusOr<std::string> QueryBlisDefault() { return ProbeInChild(std::nullopt, false); }

namespace {

// Chooses, sets BLIS_ARCH_TYPE if need be, initialises BLIS and logs.
std::string ChooseAndLog() {
  // BLIS fixes its sub-configuration at its first call, for the life of
  // the process: this process cannot ask BLIS for its own pick, nor try a
  // candidate, without being stuck with the answer; and a kernel the CPU
  // cannot run dies of SIGILL. A fork()ed child can do both and we keep
  // only its verdict. The child uses only this thread, malloc (which glibc
  // keeps usable across fork) and a BLIS no thread here has touched yet.
  auto log = Logger();
  const CpuFeatures cpu = DetectCpuFeatures();
  BlisLibrary lib = LinkedBlis();
  std::optional<std::string> user;
  if (const char* v = std::getenv("BLIS_ARCH_TYPE")) user = v;
  if (user) {
    // A setting whose self-test dies (a kernel this CPU cannot run: SIGILL;
    // an id BLIS aborts on) would kill this process at its first multiply:
    // dropped, with why, and the choice made as if it were unset.
    auto r = ProbeInChild(user, true);
    // The child ran and died or failed the self-test (Internal); not a fork,
    // a pipe or a timeout on a loaded host, which say nothing of the setting.
    if (absl::IsInternal(r.status()) && !absl::StartsWith(r.status().message(), "pipe:")) {
      log->warn("BLIS_ARCH_TYPE={} ({}) failed its self-test ({}): ignored, and tpuemu chooses as if it were unset",
                *user, DescribeArchType(*user, lib), std::string(absl::StripAsciiWhitespace(r.status().message())));
      unsetenv("BLIS_ARCH_TYPE");  // as the setenv below: BLIS reads it at its first call
      user.reset();
    }
  }
  if (!user) {
    auto d = QueryBlisDefault();
    if (d.ok()) lib.default_config = *d;
    else log->warn("could not learn BLIS's own sub-configuration: {}", std::string(d.status().message()));
  }
  const KernelPlan plan = PlanBlisKernel(cpu, lib, user);
  std::string chosen;
  for (const std::string& name : plan.candidates) {
    auto r = ProbeInChild(std::to_string(ArchId(lib, name)), true, name);
    if (r.ok()) {
      chosen = name;
      break;
    }
    log->warn("BLIS sub-configuration '{}' failed its self-test, not used: {}", name, std::string(r.status().message()));
  }
  if (!chosen.empty()) {
    // Read by BLIS at its first call, just below. setenv is not safe
    // against a getenv in another thread: glibc frees an environ array only
    // when setenv grows one it grew before, so the risk is limited to
    // processes that added variables earlier, once; accepted.
    setenv("BLIS_ARCH_TYPE", std::to_string(ArchId(lib, chosen)).c_str(), 1);
  }
  bli_init();
  std::string used = bli_arch_string(bli_arch_query_id());
  if (user) {
    log->info("BLIS kernels: '{}': {}", used, plan.why);
    return used;
  }
  std::vector<std::string> ids;
  for (const std::string& name : RunnableConfigs(cpu, lib.built)) ids.push_back(absl::StrCat(ArchId(lib, name), " ", name));
  ids.push_back(absl::StrCat(ArchId(lib, "generic"), " generic"));
  const std::string hint = absl::StrCat("Override: BLIS_ARCH_TYPE=<arch_t number> (", absl::StrJoin(ids, ", "), ")");
  if (!chosen.empty() && used != chosen) {
    log->warn("BLIS kernels: '{}', not '{}': BLIS was initialised before tpuemu could choose", used, chosen);
  } else if (!chosen.empty()) {
    log->info("BLIS kernels: '{}' (BLIS_ARCH_TYPE={} for this process; exact self-test passed): {}. {}", used,
              ArchId(lib, chosen), plan.why, hint);
  } else if (!plan.candidates.empty()) {
    log->warn("BLIS kernels: '{}': every better sub-configuration failed its self-test; {}. {}", used, plan.why,
              hint);
  } else {
    log->info("BLIS kernels: '{}': {}. {}", used, plan.why, hint);
  }
  return used;
}

}  // namespace

const std::string& EnsureBlisKernel() {
  static const std::string used = ChooseAndLog();  // thread-safe, once
  return used;
}

}  // namespace tpuemu
