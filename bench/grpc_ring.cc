// The least a ring collective over tpuemu's gRPC transport costs: n processes
// on 127.0.0.1, each a PeerService and a GrpcFabric (the worker's own, with
// its channel arguments), doing a unidirectional ring all-gather or all-reduce
// with nothing else: no coordinator, no chips, no emulated clock, no start
// barrier over the wire. A received frame is handled in gRPC's own thread
// (copied or added into the rank's buffer, then forwarded by lending that
// buffer), so that no thread hand-off is counted that the wire does not need.
// What is left is the data path's unavoidable cost over gRPC: its framing,
// its threads, the kernel's two copies, and the one copy out of gRPC's
// receive slices (gRPC cannot read into a buffer of ours).
//
// Usage: grpc_ring [ranks=8, a power of 2] [chunk KiB=1024]. Prints busbw (nccl-tests
// definitions, as datapath_bench and mpi_collectives) at 1, 8 and 64 MiB of
// f32: median and best of 8 timed runs after 2 warm-up runs, each from a
// barrier in shared memory to the last rank's last byte.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/pod/topology.h"
#include "core/wire/frame.h"
#include "services/grpc_fabric.h"
#include "services/peer_service.h"
#include "services/server.h"

namespace tpuemu {
namespace {

constexpr int kMaxRanks = 16;
constexpr int kWarmups = 2, kTimed = 8;

// Shared by the ranks (mapped before they fork).
struct Shared {
  std::atomic<int> port[kMaxRanks];
  std::atomic<int> arrived;
  std::atomic<int> generation;
  std::atomic<int64_t> start_ns[kMaxRanks];
  std::atomic<int64_t> end_ns[kMaxRanks];
  std::atomic<int> failed;
};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Barrier(Shared& s, int n) {
  const int gen = s.generation.load();
  if (s.arrived.fetch_add(1) + 1 == n) {
    s.arrived = 0;
    s.generation.fetch_add(1);
    return;
  }
  while (s.generation.load() == gen) std::this_thread::sleep_for(std::chrono::microseconds(20));
}

enum class Op { kAllGather, kAllReduce };

// One rank's part of one run. Tags carry the piece, the chunk and whether the
// frame is in the all-reduce's gather phase.
class RingRun {
 public:
  RingRun(Op op, int rank, int n, size_t bytes, size_t chunk)
      : op_(op), rank_(rank), n_(n), piece_(bytes / n), chunk_(std::min(chunk, bytes / n)),
        data_(std::make_shared<Payload>(bytes / sizeof(float), static_cast<float>(rank + 1))) {
    // Bytes this rank receives: n - 1 pieces per ring pass.
    expected_ = (op == Op::kAllReduce ? 2 : 1) * (n - 1) * piece_;
  }

  // This rank's own piece (all-gather) or its partial sum of piece `rank`
  // (the reduce-scatter's first step).
  void Start(Fabric& fabric) {
    for (size_t off = 0; off < piece_; off += chunk_) Send(fabric, rank_, off, /*gather=*/op_ == Op::kAllGather);
  }

  void Receive(Fabric& fabric, Frame&& frame) {
    const int p = static_cast<int>(frame.header.tag >> 40);
    const size_t off = (frame.header.tag >> 1) & ((uint64_t{1} << 39) - 1);
    const bool gather = frame.header.tag & 1;
    const size_t n = frame.received ? frame.received->size() : 0;
    auto* dst = reinterpret_cast<std::byte*>(data_->data()) + p * piece_ + off;
    if (gather) {
      frame.received->ForEachPiece(0, n, [&](const std::byte* src, size_t k) {
        std::memcpy(dst, src, k);
        dst += k;
      });
    } else {
      // As a chip adds: through a block that stays in L1, because gRPC's
      // slices split floats.
      auto* acc = reinterpret_cast<float*>(dst);
      const size_t elements = n / sizeof(float);
      for (size_t first = 0; first < elements; first += kAddBlock) {
        const size_t len = std::min(kAddBlock, elements - first);
        frame.CopyOut(first, len, block_);
        for (size_t i = 0; i < len; ++i) acc[first + i] += block_[i];
      }
    }
    // A piece goes round the ring once per pass. All-gather's piece p starts
    // at rank p. The all-reduce's partial sums of piece p start at rank p too
    // and are complete at rank p - 1, n - 1 hops on, which starts their gather
    // phase. Neither pass goes back to where it started.
    const bool ends_here = gather && Mod(rank_ - (op_ == Op::kAllGather ? p - 1 : p - 2)) == 0;
    if (!ends_here) Send(fabric, p, off, gather || Mod(p - 1 - rank_) == 0);
    received_ += n;
  }

  int Mod(int x) const { return ((x % n_) + n_) % n_; }
  bool Done() const { return received_.load() >= expected_; }

  // All-gather: every piece p is rank p's value. All-reduce: every element is
  // the sum of the ranks' values.
  bool Correct() const {
    for (int p = 0; p < n_; ++p) {
      const float want = op_ == Op::kAllGather ? p + 1 : n_ * (n_ + 1) / 2.0f;
      const auto first = data_->begin() + p * piece_ / sizeof(float);
      const auto wrong = std::find_if(first, first + piece_ / sizeof(float), [&](float v) { return v != want; });
      if (wrong != first + piece_ / sizeof(float)) {
        std::fprintf(stderr, "rank %d, piece %d: element %td is %g, not %g\n", rank_, p, wrong - data_->begin(),
                     *wrong, want);
        return false;
      }
    }
    return true;
  }

 private:
  void Send(Fabric& fabric, int p, size_t off, bool gather) {
    Frame f;
    f.header.src_chip = rank_;
    f.header.dst_chip = (rank_ + 1) % n_;
    f.header.tag = (uint64_t(p) << 40) | (uint64_t(off) << 1) | (gather ? 1 : 0);
    const size_t k = std::min(chunk_, piece_ - off);
    f.header.emu_bytes = k;
    f.lent.push_back({reinterpret_cast<const std::byte*>(data_->data()) + p * piece_ + off, k, data_});
    fabric.Send(std::move(f), [](absl::Status s) {
      if (!s.ok()) std::fprintf(stderr, "send: %s\n", s.ToString().c_str());
    });
  }

  Op op_;
  int rank_, n_;
  size_t piece_, chunk_;
  std::shared_ptr<Payload> data_;
  size_t expected_ = 0;
  std::atomic<size_t> received_{0};
  static constexpr size_t kAddBlock = 2048;
  float block_[kAddBlock];
};

constexpr uint64_t kSizes[] = {1 << 20, 8 << 20, 64 << 20};
constexpr Op kOps[] = {Op::kAllGather, Op::kAllReduce};

void RunRank(Shared& shared, int rank, int n, size_t chunk) {
  PrepareProcessForDataPath();
  WarmHeap(64 << 20);
  std::atomic<RingRun*> run{nullptr};
  GrpcFabric* fabric_ptr = nullptr;
  PeerServiceImpl peer([&](Frame&& f) { run.load()->Receive(*fabric_ptr, std::move(f)); });
  auto server = StartServer("127.0.0.1:0", {&peer});
  if (!server.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, server.status().ToString().c_str());
    shared.failed = 1;
    std::_Exit(1);
  }
  shared.port[rank] = server->port;
  Barrier(shared, n);
  auto topo = *Topology::Create({absl::StrCat("v5p:", n), 1, 1, "none"});
  std::map<int, std::string> addresses;
  for (int r = 0; r < n; ++r) addresses[r] = absl::StrCat("127.0.0.1:", shared.port[r].load());
  GrpcFabric fabric(topo, rank, addresses);
  fabric_ptr = &fabric;
  for (Op op : kOps) {
    for (uint64_t bytes : kSizes) {
      std::vector<double> seconds;
      for (int i = 0; i < kWarmups + kTimed; ++i) {
        RingRun ring(op, rank, n, bytes, chunk);
        run = &ring;
        Barrier(shared, n);
        shared.start_ns[rank] = NowNs();
        ring.Start(fabric);
        while (!ring.Done()) std::this_thread::sleep_for(std::chrono::microseconds(20));
        shared.end_ns[rank] = NowNs();
        if (!ring.Correct()) shared.failed = 1;
        Barrier(shared, n);  // nothing in flight any more: every rank has all it expects
        if (rank == 0 && i >= kWarmups) {
          int64_t first = INT64_MAX, last = 0;
          for (int r = 0; r < n; ++r) {
            first = std::min<int64_t>(first, shared.start_ns[r]);
            last = std::max<int64_t>(last, shared.end_ns[r]);
          }
          seconds.push_back((last - first) * 1e-9);
        }
      }
      if (rank == 0) {
        std::sort(seconds.begin(), seconds.end());
        const double factor = (op == Op::kAllReduce ? 2.0 : 1.0) * (n - 1) / n * bytes / 1e9;
        std::printf("%-11s %4lluM %8.3f %8.3f%s\n", op == Op::kAllReduce ? "all-reduce" : "all-gather",
                    static_cast<unsigned long long>(bytes >> 20), factor / seconds[seconds.size() / 2],
                    factor / seconds[0], shared.failed ? "  WRONG RESULT" : "");
        std::fflush(stdout);
      }
    }
  }
  fabric.Disconnect();
  server->server->Shutdown(std::chrono::system_clock::now());
  std::_Exit(0);
}

}  // namespace
}  // namespace tpuemu

int main(int argc, char** argv) {
  using namespace tpuemu;
  const int n = argc > 1 ? std::atoi(argv[1]) : 8;
  const size_t chunk = (argc > 2 ? std::atoll(argv[2]) : 1024) << 10;
  if (n < 2 || n > kMaxRanks || (n & (n - 1)) != 0 || chunk == 0) {
    std::fprintf(stderr, "usage: grpc_ring [ranks: 2, 4, 8 or 16] [chunk KiB > 0]\n");
    return 2;
  }
  setenv("TPUEMU_INSECURE", "1", 1);  // plaintext, as OpenMPI over TCP
  auto* shared = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  new (shared) Shared{};
  // The ranks fork before anything starts gRPC; this process only watches.
  std::vector<pid_t> ranks;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid == 0) RunRank(*shared, r, n, chunk);
    ranks.push_back(pid);
  }
  std::printf("== Ring collectives over tpuemu's gRPC transport alone: %d processes, %zu KiB frames, f32; "
              "busbw GB/s, median / best of %d ==\n",
              n, chunk >> 10, kTimed);
  std::printf("%-11s %5s %8s %8s\n", "op", "size", "median", "best");
  std::fflush(stdout);
  int failed = 0;
  for (pid_t pid : ranks) {
    int status = 0;
    waitpid(pid, &status, 0);
    failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  return failed || shared->failed ? 1 : 0;
}
