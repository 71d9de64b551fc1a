// Local matmul speed: a chip's multiply inside a real matmul job (through
// the planner, the chip's blocks, BLIS behind tpuemu::Gemm) against bare BLIS
// sgemm on the same shapes, side by side in one run. Both run one matmul per
// core at once (2 chips, 2 threads), as a host's chips do.
//   build/bin/matmul_bench [max_local_size]
//   build/bin/matmul_bench --sustained SECONDS [THREADS [AT_ONCE]]: the
//     machine's sustained throughput (every core multiplying n = 1024 for
//     SECONDS), GFLOP/s per core; with THREADS multiplying threads instead of
//     one per core, at most AT_ONCE of them at a time (the workers'
//     --matmuls-at-once), to see what more chips than cores cost
// The reference is the fastest of BLIS's sub-configurations this CPU can run,
// not BLIS's own pick (issue 21: Debian's BLIS picks 'generic' on Zen 5, 5x
// slower than its 'skx', so a chip matching "bare BLIS" proved nothing). BLIS
// fixes its sub-configuration at its first call, so each bare measurement is a
// fresh process: this binary with --bare N under BLIS_ARCH_TYPE.
#include <blis.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_args.h"
#include "bench/machine.h"
#include "core/tensor/blis_kernel.h"
#include "core/tensor/gemm.h"
#include "core/tensor/matmul_gate.h"
#include "core/job/inprocess_pod.h"
#include "core/matmul/report.h"
#include "core/matmul/spec.h"
#include "core/wire/frame.h"
#include "worker/huge_pages.h"

extern char** environ;

namespace tpuemu {
namespace {

using Clock = std::chrono::steady_clock;

// How many times each side multiplies per measurement: the first untimed
// (BLIS's start-up, its packing buffers' and a fresh pod's first touch), the
// fastest of the others taken, as one multiply of 2 ms (n = 512) is at the
// mercy of this machine's neighbours.
constexpr int kReps = 4;

// Bare BLIS: each thread multiplies its own n x n matrices, single-threaded
// BLIS, kReps times. The threads multiply together, rep by rep, and a rep
// counts its slowest thread, as a job counts its slowest chip (before, each
// thread's best rep was taken alone, which could come while the other core
// was idle).
double BareGflopsPerCore(int64_t n, int threads) {
  std::vector<std::vector<double>> seconds(kReps, std::vector<double>(threads, 0));
  std::barrier together(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<float> a(n * n), b(n * n), c(n * n);
      for (int64_t i = 0; i < n * n; ++i) {
        a[i] = static_cast<float>((i * 7 + t) % 13) - 6;
        b[i] = static_cast<float>((i * 5 + t) % 11) - 5;
      }
      rntm_t rntm = BLIS_RNTM_INITIALIZER;
      bli_rntm_set_num_threads(1, &rntm);
      float one = 1, zero = 0;
      for (int rep = 0; rep < kReps; ++rep) {
        together.arrive_and_wait();
        const auto start = Clock::now();
        bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, n, n, n, &one, a.data(), n, 1, b.data(), n, 1, &zero,
                     c.data(), n, 1, nullptr, &rntm);
        seconds[rep][t] = std::chrono::duration<double>(Clock::now() - start).count();
      }
    });
  }
  for (auto& th : pool) th.join();
  double gflops = 0;
  for (int rep = 1; rep < kReps; ++rep) {  // the first: BLIS's start-up, untimed
    gflops = std::max(gflops, 2.0 * n * n * n / *std::max_element(seconds[rep].begin(), seconds[rep].end()) / 1e9);
  }
  return gflops;
}

// The machine's sustained throughput: one thread per core (or `threads`, at
// most `at_once` of them multiplying at a time; 0: no limit), each
// multiplying n x n matrices with single-threaded BLIS (the chips' kernels)
// over and over for `seconds`; GFLOP/s per core over the whole time. A
// training step takes seconds, in which this machine's neighbours take their
// share; the best of a few 15 ms multiplies (BareGflopsPerCore) is its burst
// speed.
double SustainedGflopsPerCore(int64_t n, double seconds, int threads, int at_once) {
  EnsureBlisKernel();
  ProcessMatmulGate().set_limit(at_once);
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  if (threads <= 0) threads = cores;
  std::vector<int64_t> done(threads, 0);
  std::vector<std::thread> pool;
  const auto start = Clock::now();
  const auto until = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
      while (Clock::now() < until) {
        Gemm({a.data(), n, n, n, 1}, {b.data(), n, n, n, 1}, {c.data(), n, n, n, 1});
        ++done[t];
      }
    });
  }
  for (auto& th : pool) th.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  int64_t multiplies = 0;
  for (int64_t d : done) multiplies += d;
  return 2.0 * n * n * n * static_cast<double>(multiplies) / elapsed / cores / 1e9;
}

// BareGflopsPerCore in a fresh process under BLIS_ARCH_TYPE=arch_id (unset if
// none); BLIS_ARCH_DEBUG dropped, so that its output shows the chip's choice.
double BareInChild(int64_t n, std::optional<int> arch_id, const std::string& want) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "BLIS_ARCH_TYPE=", 15) != 0 && std::strncmp(*e, "BLIS_ARCH_DEBUG=", 16) != 0) env.push_back(*e);
  }
  if (arch_id) env.push_back(absl::StrCat("BLIS_ARCH_TYPE=", *arch_id));
  std::vector<char*> envp;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string exe = "/proc/self/exe", flag = "--bare", size = std::to_string(n);
  char* argv[] = {exe.data(), flag.data(), size.data(), nullptr};
  int fds[2];
  if (pipe(fds) != 0) std::exit(1);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  pid_t pid = 0;
  const int err = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  std::string out;
  char buf[256];
  for (ssize_t got; err == 0 && (got = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, got);
  close(fds[0]);
  int status = 1;
  if (err == 0) waitpid(pid, &status, 0);
  char name[64] = "";
  double gflops = 0;
  if (err != 0 || status != 0 || std::sscanf(out.c_str(), "%63s %lf", name, &gflops) != 2 || name != want) {
    std::fprintf(stderr, "bare BLIS '%s' at n=%lld failed (status %d): %s\n", want.c_str(), static_cast<long long>(n),
                 status, out.c_str());
    std::exit(1);
  }
  return gflops;
}

// The product as a job on a 2-chip pod: C[I_X, K] = A[I_X, J] * B[J, K]
// has no communication and gives each chip an n x n x n local multiply.
double ChipGflopsPerCore(int64_t n) {
  auto topo = Topology::Create({"v5p:2", 1, 2, "auto"});
  InProcessPod pod(*topo, 0);
  MatmulSpec spec;
  spec.expr = "A[I_X, J] * B[J, K] -> C[I_X, K]";
  spec.dims = absl::StrCat("I=", 2 * n, ",J=", n, ",K=", n);
  // kReps jobs, as bare BLIS multiplies: a pod runs job after job, and the
  // first job of a fresh pod pays its chips' threads and memory coming in.
  double gflops = 0;
  for (int rep = 0; rep < kReps; ++rep) {
    auto r = RunReport<MatmulReport>(pod, spec);
    if (!r.ok() || !r->correct) {
      std::fprintf(stderr, "matmul failed: %s\n", r.ok() ? "wrong result" : std::string(r.status().message()).c_str());
      std::exit(1);
    }
    // wall_s: the slowest chip's steps (here just its multiply), checks excluded.
    if (rep > 0) gflops = std::max(gflops, static_cast<double>(r->flops_per_chip) / r->wall_s / 1e9);
  }
  return gflops;
}

}  // namespace
}  // namespace tpuemu

int main(int argc, char** argv) {
  // This process allocates as a worker does, so that a chip here is a chip
  // in a worker: huge pages for its tensors (worker/huge_pages.h; the bare
  // children inherit them), and freed blocks kept, faulted in, on one heap
  // (a worker gives them back only once idle). Before, the chip's fresh
  // product faulted in page by page on every job, which bare BLIS's timed
  // multiply (its second) never does: at n = 512 a third of a 2 ms multiply
  // (docs/benchmarks.md, "BLIS's sub-configuration").
  tpuemu::ExecWithHugePageMalloc(argv);
  tpuemu::PrepareProcessForDataPath();
  const tpuemu::BenchArgs args(
      argc, argv,
      "matmul_bench [MAX_N]            chip against bare BLIS under each sub-configuration, n = 512 to MAX_N\n"
      "                                (512 to 8192, default 2048), GFLOP/s per core\n"
      "       matmul_bench --sustained SECONDS [THREADS [AT_ONCE]]\n"
      "                                n = 1024 multiplies on THREADS threads (0: one per core) for SECONDS,\n"
      "                                AT_ONCE of them at a time (0: the chips' own limit); GFLOP/s per core\n"
      "       matmul_bench --bare N    one bare BLIS multiply of n = N (what the table's bare columns run)",
      4);
  if (args.Text(1) == "--bare") {
    if (args.Has(3)) args.Exit(2, "--bare takes one N");
    const double gflops = tpuemu::BareGflopsPerCore(args.Whole(2, "N", 1024, 1, 16384), 2);
    std::printf("%s %.3f\n", bli_arch_string(bli_arch_query_id()), gflops);
    return 0;
  }
  if (args.Text(1) == "--sustained") {
    if (!args.Has(2)) args.Exit(2, "--sustained takes SECONDS");
    const double seconds = args.Number(2, "SECONDS", 0, 0.1, 3600);
    const int threads = args.Whole(3, "THREADS", 0, 0, 1024), at_once = args.Whole(4, "AT_ONCE", 0, 0, 1024);
    std::printf("%.1f\n", tpuemu::SustainedGflopsPerCore(1024, seconds, threads, at_once));
    return 0;
  }
  if (args.Has(2)) args.Exit(2, "one MAX_N only");
  const int64_t max_n = args.Whole(1, "MAX_N", 2048, 512, 8192);
  tpuemu::PrintMachine();
  // BLIS's own pick first: asked in a child, before this process uses BLIS.
  const auto blis_default = tpuemu::QueryBlisDefault();
  if (!blis_default.ok()) {
    std::fprintf(stderr, "BLIS's own pick: %s\n", std::string(blis_default.status().message()).c_str());
    return 1;
  }
  // The chip's kernels, chosen (and logged) now, outside the timed multiplies.
  const std::string chip_config = tpuemu::EnsureBlisKernel();
  const tpuemu::BlisLibrary lib = tpuemu::LinkedBlis();
  // Each sub-configuration the CPU can run; BLIS's own pick runs as BLIS picks it.
  std::vector<std::string> configs = {*blis_default};
  for (const auto& c : tpuemu::RunnableConfigs(tpuemu::DetectCpuFeatures(), lib.built)) {
    if (c != *blis_default) configs.push_back(c);
  }
  std::printf("chip: tpuemu::Gemm with BLIS '%s'; BLIS by itself picks '%s' (*); %s\n", chip_config.c_str(),
              blis_default->c_str(), tpuemu::HugePagesReport().c_str());
  // The two are measured in turns, so that a noisy neighbour slows both.
  constexpr int kRounds = 7;
  std::printf("local n^3 matmul, 2 at once (one per core), best of %d taken in turns, GFLOP/s per core;\n", kRounds);
  std::printf("bare BLIS sgemm under each sub-configuration this CPU can run, a fresh process each\n");
  std::printf("%6s", "n");
  for (const auto& c : configs) std::printf(" %11s", (c == *blis_default ? c + "*" : c).c_str());
  std::printf(" %11s %11s %10s %12s\n", "best BLIS", "chip", "chip/best", "per round");
  auto arch = [&](size_t i) {  // BLIS's own pick runs as BLIS picks it
    return i == 0 ? std::nullopt : std::optional<int>(tpuemu::ArchId(lib, configs[i]));
  };
  for (int64_t n = 512; n <= max_n; n *= 2) {
    std::vector<std::vector<double>> bare(configs.size());
    std::vector<double> chip, ratios;
    for (int round = 0; round < kRounds; ++round) {
      size_t fastest = 0;
      for (size_t i = 0; i < configs.size(); ++i) {
        bare[i].push_back(tpuemu::BareInChild(n, arch(i), configs[i]));
        if (bare[i].back() > bare[fastest].back()) fastest = i;
      }
      chip.push_back(tpuemu::ChipGflopsPerCore(n));
      // The machine's speed drifts from minute to minute (other guests), so
      // the chip is also set against the round's fastest configuration
      // measured just before and just after it.
      const double after = tpuemu::BareInChild(n, arch(fastest), configs[fastest]);
      ratios.push_back(chip.back() / ((bare[fastest].back() + after) / 2));
    }
    auto best_of = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
    size_t best = 0;
    for (size_t i = 1; i < configs.size(); ++i) {
      if (best_of(bare[i]) > best_of(bare[best])) best = i;
    }
    std::sort(ratios.begin(), ratios.end());
    std::printf("%6lld", static_cast<long long>(n));
    for (const auto& g : bare) std::printf(" %11.1f", best_of(g));
    std::printf(" %11s %11.1f %10.3f %12.3f\n", configs[best].c_str(), best_of(chip),
                best_of(chip) / best_of(bare[best]), ratios[ratios.size() / 2]);
  }
  std::printf("chip/best: best of the chip's rounds over the best configuration's; per round: the median over the\n"
              "rounds of the chip's rate over the mean of the round's fastest configuration just before and after it\n");
  return 0;
}
