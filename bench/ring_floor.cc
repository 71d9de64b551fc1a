// A bare ring collective over a transport, to tell what the transport costs
// from what tpuemu adds: n processes on 127.0.0.1 doing a ring all-gather or
// all-reduce with nothing else: no coordinator, no chips, no emulated clock,
// no start barrier over the wire. The ring is a bi-ring, as tpuemu runs a ring
// axis: half of every piece each way. A received frame is handled in the
// transport's own thread (a gathered frame forwarded as received, then copied
// into the rank's buffer; an addend added into it, then forwarded from it), so
// that no thread hand-off is counted that the wire does not need; the thread
// that receives a rank's last byte stops its clock. It is the simplest way to
// use each transport, not a proven best.
//   grpc: tpuemu's own transport, a PeerService and a GrpcFabric per rank
//     (the worker's channel arguments) on one PeerQueue, whose thread handles
//     the frames: HTTP/2 framing, the kernel's two copies and one copy out of
//     gRPC's receive slices (gRPC cannot read into a buffer of ours).
//   tcp: the same frames over plain sockets (bench/socket_ring_fabric.h),
//     a gathered frame read straight into the rank's buffer, as MPI reads:
//     the kernel's two copies and the threads.
//   tcp-copy: the same, read into a buffer and copied, as over gRPC: against
//     grpc, what gRPC's framing and threads cost.
//
// Usage: ring_floor [grpc|tcp|tcp-copy] [ranks=8: 4, 8 or 16] [chunk KiB=1024,
// at most 4096] [chip: frames handled in a thread of the rank's own, as a
// worker's chip takes them from its mailbox, instead of the transport's].
// Prints busbw (nccl-tests definitions, as datapath_bench and mpi_collectives)
// at 1, 8 and 64 MiB of f32 (frames of at most the chunk: a piece's half is
// smaller at 1 and 8 MiB): median and best of 8 timed runs after 2 warm-up
// runs, each from a barrier in shared memory to the last rank's last byte. A
// rank that fails stops them all (exit status 1).
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/loopback_socket.h"
#include "bench/machine.h"
#include "bench/socket_ring_fabric.h"
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

// A rank that cannot go on marks the run failed and leaves: the others
// leave at their next barrier or wait, and the parent reports it.
[[noreturn]] void Abandon(Shared& s) {
  s.failed = 1;
  std::_Exit(1);
}

// Waiting ranks poll every `poll`: briefly before a timed run, so that they
// start together; seldom after one, so that ranks that finished early take
// little CPU from those still receiving.
void Barrier(Shared& s, int n, std::chrono::microseconds poll) {
  const int gen = s.generation.load();
  if (s.arrived.fetch_add(1) + 1 == n) {
    s.arrived = 0;
    s.generation.fetch_add(1);
    return;
  }
  while (s.generation.load() == gen) {
    if (s.failed) std::_Exit(1);
    std::this_thread::sleep_for(poll);
  }
}
constexpr std::chrono::microseconds kStartPoll{20}, kEndPoll{1000};

enum class Op { kAllGather, kAllReduce };

// One rank's part of one run, on a bi-ring as tpuemu plans a ring axis: the
// first half of every piece goes round one way, the second half the other.
// A tag carries the piece, the offset in it, the direction and whether the
// frame is in a gather phase (all-gather, or the all-reduce's second pass).
class RingRun {
 public:
  RingRun(Shared& shared, Op op, int rank, int n, size_t bytes, size_t chunk)
      : shared_(shared), op_(op), rank_(rank), n_(n), piece_(bytes / n), chunk_(std::min(chunk, piece_ / 2)),
        data_(std::make_shared<Payload>(bytes / sizeof(float), static_cast<float>(rank + 1))) {
    // Bytes this rank receives: n - 1 pieces per pass round the ring.
    expected_ = (op == Op::kAllReduce ? 2 : 1) * (n - 1) * piece_;
  }

  // This rank's own piece (all-gather) or its addend of piece `rank` (the
  // reduce-scatter's first step), half each way.
  void Start(Fabric& fabric) {
    for (size_t half : {size_t{0}, piece_ / 2}) {
      for (size_t off = half; off < half + piece_ / 2; off += chunk_) {
        Send(fabric, rank_, off, /*gather=*/op_ == Op::kAllGather);
      }
    }
  }

  // Where a gathered frame's elements go in this rank's buffer; nullptr for a
  // sum's addend.
  std::byte* Place(uint64_t tag) const {
    if (!(tag & 1)) return nullptr;
    return reinterpret_cast<std::byte*>(data_->data()) + (tag >> 40) * piece_ + ((tag >> 1) & kOffsetMask);
  }

  // A frame the transport read in place has no elements of its own.
  void Receive(Fabric& fabric, Frame&& frame) {
    const int p = static_cast<int>(frame.header.tag >> 40);
    const size_t off = (frame.header.tag >> 1) & kOffsetMask;
    const bool gather = frame.header.tag & 1;
    const size_t elements = frame.header.emu_bytes / sizeof(float);
    float* dst = data_->data() + (p * piece_ + off) / sizeof(float);
    // Each pass takes a piece n - 1 hops from where it starts. k is this
    // rank's hops from rank p in the frame's direction. All-gather's piece p
    // starts at p. The all-reduce's addends of piece p start at p too; their
    // sum is complete at k = n - 1, which starts the gather pass (n - 1 hops
    // on is k = n - 2).
    const int k = Mod(Direction(off) * (rank_ - p));
    const bool ends_here = gather && k == (op_ == Op::kAllGather ? n_ - 1 : n_ - 2);
    if (gather) {
      if (frame.elements() == 0) {  // read in place
        if (!ends_here) Send(fabric, p, off, true);
      } else {
        // Forwarded as received, before the copy (cut-through, as tpuemu's
        // chips do), so that the copy never delays the next hop.
        const auto held = std::make_shared<const Frame>(std::move(frame));
        if (!ends_here) {
          std::vector<Segment> received;
          held->Lend(0, elements, held, &received);
          Send(fabric, p, off, true, std::move(received));
        }
        held->CopyOut(0, elements, dst);
      }
    } else {
      // As a chip adds: through a block that stays in L1, because gRPC's
      // slices split floats. One per call: the two directions' frames arrive
      // in two threads.
      float block[kAddBlock];
      for (size_t first = 0; first < elements; first += kAddBlock) {
        const size_t len = std::min(kAddBlock, elements - first);
        frame.CopyOut(first, len, block);
        for (size_t i = 0; i < len; ++i) dst[first + i] += block[i];
      }
      Send(fabric, p, off, k == n_ - 1);
    }
    if (received_.fetch_add(elements * sizeof(float)) + elements * sizeof(float) == expected_) {
      shared_.end_ns[rank_] = NowNs();
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
      done_cv_.notify_all();
    }
  }

  // Blocks until the last byte has arrived, or leaves if another rank failed.
  void WaitDone() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!done_cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return done_; })) {
      if (shared_.failed) std::_Exit(1);
    }
  }

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
  int Mod(int x) const { return ((x % n_) + n_) % n_; }
  // +1 (to the next rank) for the first half of a piece, -1 for the second.
  int Direction(size_t off) const { return off < piece_ / 2 ? 1 : -1; }

  // Sends the rank's own elements there, or `segments` that hold them.
  void Send(Fabric& fabric, int p, size_t off, bool gather, std::vector<Segment> segments = {}) const {
    Frame f;
    f.header.src_chip = rank_;
    f.header.dst_chip = Mod(rank_ + Direction(off));
    f.header.tag = (uint64_t(p) << 40) | (uint64_t(off) << 1) | (gather ? 1 : 0);
    const size_t half_end = Direction(off) > 0 ? piece_ / 2 : piece_;
    const size_t bytes = std::min(chunk_, half_end - off);
    f.header.emu_bytes = bytes;
    if (segments.empty()) {
      f.lent.push_back({reinterpret_cast<const std::byte*>(data_->data()) + p * piece_ + off, bytes, data_});
    } else {
      f.lent = std::move(segments);
    }
    // Called when the frame has left, maybe after this run is over.
    fabric.Send(std::move(f), [rank = rank_, &shared = shared_](absl::Status s) {
      if (s.ok()) return;
      std::fprintf(stderr, "rank %d: send: %s\n", rank, s.ToString().c_str());
      Abandon(shared);
    });
  }

  Shared& shared_;
  Op op_;
  int rank_, n_;
  size_t piece_, chunk_;
  std::shared_ptr<Payload> data_;
  size_t expected_ = 0;
  std::atomic<size_t> received_{0};
  std::mutex mu_;
  std::condition_variable done_cv_;
  bool done_ = false;
  static constexpr uint64_t kOffsetMask = (uint64_t{1} << 39) - 1;
  static constexpr size_t kAddBlock = 2048;
};

constexpr uint64_t kSizes[] = {1 << 20, 8 << 20, 64 << 20};
constexpr Op kOps[] = {Op::kAllGather, Op::kAllReduce};

enum class Transport { kGrpc, kTcp, kTcpCopy };

// With `chip`, received frames are handled by one thread of the rank's own,
// as a worker's chip thread takes them from its mailbox, instead of in the
// transport's thread: what that hand-off costs.
class ChipThread {
 public:
  explicit ChipThread(std::function<void(Frame&&)> handle)
      : handle_(std::move(handle)), thread_([this] { Loop(); }) {}
  ~ChipThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  void Push(Frame&& f) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      frames_.push_back(std::move(f));
    }
    cv_.notify_one();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || !frames_.empty(); });
      if (frames_.empty()) return;
      Frame f = std::move(frames_.front());
      frames_.pop_front();
      lock.unlock();
      handle_(std::move(f));
      lock.lock();
    }
  }
  std::function<void(Frame&&)> handle_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Frame> frames_;
  bool stop_ = false;
  std::thread thread_;
};

void RunRank(Shared& shared, int rank, int n, size_t chunk, Transport transport, bool chip_thread) {
  PrepareProcessForDataPath();
  WarmHeap(64 << 20);
  std::atomic<RingRun*> run{nullptr};
  Fabric* fabric = nullptr;
  auto handle = [&](Frame&& f) { run.load()->Receive(*fabric, std::move(f)); };
  std::optional<ChipThread> chip;
  if (chip_thread) chip.emplace(handle);
  std::function<void(Frame&&)> sink = handle;
  if (chip_thread) sink = [&](Frame&& f) { chip->Push(std::move(f)); };
  std::optional<PeerServiceImpl> peer;
  std::optional<RunningServer> server;
  std::unique_ptr<GrpcFabric> grpc_fabric;
  std::unique_ptr<SocketRingFabric> socket_fabric;
  if (transport == Transport::kGrpc) {
    peer.emplace(sink);
    auto started = StartServer("127.0.0.1:0", {}, ServerPeers::kMembersOnly, &*peer);
    if (!started.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", rank, started.status().ToString().c_str());
      Abandon(shared);
    }
    server = *std::move(started);
    shared.port[rank] = server->port;
    Barrier(shared, n, kStartPoll);
    auto topo = *Topology::Create({absl::StrCat("v5p:", n), 1, 1, "none"});
    std::map<int, std::string> addresses;
    for (int r = 0; r < n; ++r) addresses[r] = absl::StrCat("127.0.0.1:", shared.port[r].load());
    grpc_fabric = std::make_unique<GrpcFabric>(topo, rank, addresses, peer->queue());
    fabric = grpc_fabric.get();
  } else {
    socket_fabric = std::make_unique<SocketRingFabric>();
    shared.port[rank] = socket_fabric->port();
    Barrier(shared, n, kStartPoll);
    auto place = [&](uint64_t tag, size_t) {
      return transport == Transport::kTcp ? run.load()->Place(tag) : nullptr;
    };
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    socket_fabric->Connect({{next, shared.port[next]}, {prev, shared.port[prev]}}, sink, place);
    fabric = socket_fabric.get();
  }
  for (Op op : kOps) {
    for (uint64_t bytes : kSizes) {
      std::vector<double> seconds;
      for (int i = 0; i < kWarmups + kTimed; ++i) {
        RingRun ring(shared, op, rank, n, bytes, chunk);
        run = &ring;
        Barrier(shared, n, kStartPoll);
        shared.start_ns[rank] = NowNs();
        ring.Start(*fabric);
        ring.WaitDone();
        Barrier(shared, n, kEndPoll);  // nothing in flight any more: every rank has all it expects
        if (!ring.Correct()) Abandon(shared);
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
        std::printf("%-11s %4lluM %8.3f %8.3f\n", op == Op::kAllReduce ? "all-reduce" : "all-gather",
                    static_cast<unsigned long long>(bytes >> 20), factor / seconds[seconds.size() / 2],
                    factor / seconds[0]);
        std::fflush(stdout);
      }
    }
  }
  if (grpc_fabric) {
    grpc_fabric->Disconnect();
    server->server->Shutdown(std::chrono::system_clock::now());
  }
  socket_fabric.reset();
  std::_Exit(0);
}

}  // namespace
}  // namespace tpuemu

int main(int argc, char** argv) {
  using namespace tpuemu;
  const std::string name = argc > 1 ? argv[1] : "grpc";
  const int n = argc > 2 ? std::atoi(argv[2]) : 8;
  const size_t chunk = (argc > 3 ? std::atoll(argv[3]) : 1024) << 10;
  const bool chip_thread = argc > 4 && std::string(argv[4]) == "chip";
  const std::map<std::string, Transport> transports = {
      {"grpc", Transport::kGrpc}, {"tcp", Transport::kTcp}, {"tcp-copy", Transport::kTcpCopy}};
  // A frame must fit in one PeerService message (services/server.h).
  if (!transports.count(name) || n < 4 || n > kMaxRanks || (n & (n - 1)) != 0 || chunk == 0 || chunk > (4u << 20) ||
      (argc > 4 && !chip_thread) || argc > 5) {
    std::fprintf(stderr, "usage: ring_floor [grpc|tcp|tcp-copy] [ranks: 4, 8 or 16] [chunk KiB: 1 to 4096] [chip]\n");
    return 2;
  }
  const Transport transport = transports.at(name);
  setenv("TPUEMU_INSECURE", "1", 1);  // plaintext, as OpenMPI over TCP
  const std::string congestion = UseWorkersTcpCongestion();
  PrintMachine();
  std::printf("== The same ring collectives, nothing else, over %s: %d processes, frames of at most %zu KiB, f32%s; "
              "busbw GB/s, median / best of %d ==\n",
              transport == Transport::kGrpc  ? "tpuemu's gRPC transport"
              : transport == Transport::kTcp ? "plain TCP sockets, read in place"
                                             : "plain TCP sockets, read into a buffer and copied",
              n, chunk >> 10, chip_thread ? ", handled in a chip thread" : "", kTimed);
  std::printf("%s\n%-11s %5s %8s %8s\n", congestion.c_str(), "op", "size", "median", "best");
  std::fflush(stdout);
  auto* shared = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  new (shared) Shared{};
  // The ranks fork before anything starts gRPC; this process only watches.
  std::vector<pid_t> ranks;
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid == 0) RunRank(*shared, r, n, chunk, transport, chip_thread);
    ranks.push_back(pid);
  }
  // The first rank to fail ends the others (they also leave at their next
  // wait once they see it).
  bool failed = false;
  for (size_t left = ranks.size(); left > 0; --left) {
    int status = 0;
    if (waitpid(-1, &status, 0) < 0) break;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      if (!failed) {
        for (pid_t pid : ranks) kill(pid, SIGKILL);
      }
      failed = true;
    }
  }
  if (failed || shared->failed) std::fprintf(stderr, "ring_floor: a rank failed (above: why)\n");
  return failed || shared->failed ? 1 : 0;
}
