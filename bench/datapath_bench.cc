// Data-path benchmark (unpaced unless stated). Prints four tables:
//  1. busbw of each collective at n = 8 chips for three layouts of real
//     worker processes: 8 workers x 1 chip (all gRPC), 1 x 8 (all memory),
//     2 x 4 (mixed); at 1, 8 and 64 MiB of f32 (so host bytes = emulated bytes);
//  2. point-to-point PeerService stream throughput, and one frame's hop
//     latency over it;
//  3. paced links: achieved vs configured rate;
//  4. ceilings: the busbw that plain TCP sockets over loopback, and a gRPC
//     stream's cost per byte, allow each collective's socket bytes at n = 8.
// Run bench/datapath.sh to get OpenMPI's figures for the same collectives in
// the same run.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/coordinator_client.h"
#include "client/interrupt.h"
#include "client/local_pod.h"
#include "client/processes.h"
#include "bench/cpu_clock.h"
#include "bench/loopback_socket.h"
#include "bench/machine.h"
#include "bench/tcp_floor.h"
#include "core/collective/plan.h"
#include "core/collective/report.h"
#include "core/collective/spec.h"
#include "core/wire/link_sender.h"
#include "services/coordinator_service.h"
#include "services/grpc_fabric.h"
#include "services/peer_service.h"
#include "services/proto_conv.h"
#include "services/server.h"

namespace tpuemu {
namespace {

constexpr CollectiveOp kOps[] = {CollectiveOp::kAllReduce, CollectiveOp::kAllGather, CollectiveOp::kReduceScatter,
                                 CollectiveOp::kAllToAll};

// Where this run's pods keep their files; their processes name it.
std::filesystem::path PodDir() {
  return std::filesystem::temp_directory_path() / absl::StrCat("tpuemu-bench-", getpid());
}

// Held while a pod starts, and by Ctrl-C's clean-up until the process exits:
// no pod is half started when the clean-up looks, nor starts after it.
std::mutex pod_start;

// Stops the processes of this run's pod (in sessions of their own, which a
// Ctrl-C does not reach), found by the directory their command lines name.
void StopPod() {
  const std::string dir = PodDir().string() + "/";
  auto names_dir = [&](const std::string& arg) { return arg.rfind(dir, 0) == 0; };
  StopProcesses(FindProcesses([&](const std::vector<std::string>& argv) {
                  return std::any_of(argv.begin(), argv.end(), names_dir);
                }),
                3);
  std::filesystem::remove_all(PodDir());
}

// A pod of real processes on 127.0.0.1, stopped when this goes away.
class ProcessPod {
 public:
  ProcessPod(const std::string& topology, int chips_per_host) {
    std::lock_guard<std::mutex> starting(pod_start);
    Progress quiet(false);
    // Plaintext, as the OpenMPI over TCP it is compared with (TLS's own cost:
    // docs/security.md "What it costs"); the client below is told so too.
    setenv("TPUEMU_INSECURE", "1", 1);
    LocalPodOptions options;
    options.topology = {topology, 1, chips_per_host, "auto"};
    options.dir = PodDir().string();
    options.insecure = true;
    auto pod = StartLocalPod(options, quiet, [](const PodState&) { return absl::OkStatus(); });
    if (!pod.ok()) {
      std::fprintf(stderr, "could not start the pod: %s\n", std::string(pod.status().message()).c_str());
      std::exit(1);
    }
    client_ = std::make_unique<CoordinatorClient>(pod->state.coordinator);
  }
  ~ProcessPod() { StopPod(); }

  v1::CollectiveResult Run(CollectiveOp op, uint64_t bytes) {
    CollectiveSpec spec;
    spec.op = op;
    spec.axes = {Axis::kX};
    spec.bytes = bytes;
    spec.dtype_bytes = 4;
    v1::SubmitJobRequest req;
    *req.mutable_collective() = ToProto(spec);
    auto job = client_->Submit(req);
    // The workers time the collective themselves; polling every 20 ms, not
    // every 2 ms, takes less CPU from them while they do.
    while (job.ok() && !IsTerminal(job->state())) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      job = client_->Get(job->id());
    }
    if (!job.ok() || job->state() != v1::JOB_STATE_SUCCEEDED || !job->result().correct()) {
      std::fprintf(stderr, "job failed: %s\n", job.ok() ? job->error().c_str() : job.status().ToString().c_str());
      return {};
    }
    return job->result();
  }

 private:
  std::unique_ptr<CoordinatorClient> client_;
};

// Whether a job failed (named on stderr as it did): main's exit code says so.
bool any_failed = false;

// Each size once untimed, then the best of `reps`, as mpi_collectives takes
// OpenMPI's: a pod's first job of a size pays its buffers' first touch.
void CollectiveTable(int reps) {
  std::printf("== 1. Collectives, n = 8 chips on a v5p:8 ring (bi-ring), f32, unpaced; busbw GB/s, one untimed, then "
              "best of %d ==\n",
              reps);
  std::printf("%-15s %6s %14s %14s %14s\n", "op", "size", "8x1 (gRPC)", "1x8 (memory)", "2x4 (mixed)");
  struct Layout {
    int chips_per_host;
  };
  const Layout layouts[] = {{1}, {8}, {4}};
  const uint64_t sizes[] = {1 << 20, 8 << 20, 64 << 20};
  double busbw[4][3][3] = {};
  bool failed[4][3][3] = {};
  for (int l = 0; l < 3; ++l) {
    ProcessPod pod("v5p:8", layouts[l].chips_per_host);
    for (int o = 0; o < 4; ++o) {
      for (int s = 0; s < 3; ++s) {
        for (int r = -1; r < reps; ++r) {
          const v1::CollectiveResult result = pod.Run(kOps[o], sizes[s]);
          if (!result.correct()) failed[o][s][l] = any_failed = true;
          if (r >= 0) busbw[o][s][l] = std::max(busbw[o][s][l], result.busbw_gbps());
        }
      }
    }
  }
  for (int o = 0; o < 4; ++o) {
    for (int s = 0; s < 3; ++s) {
      std::printf("%-15s %5lluM", OpName(kOps[o]).c_str(), static_cast<unsigned long long>(sizes[s] >> 20));
      for (int l = 0; l < 3; ++l) {
        if (failed[o][s][l]) {
          std::printf(" %14s", "failed");
        } else {
          std::printf(" %14.3f", busbw[o][s][l]);
        }
      }
      std::printf("\n");
    }
  }
}

// A PeerService in this process and a GrpcFabric sending to it over loopback.
struct LoopbackLink {
  std::atomic<uint64_t> received{0}, frames{0};
  PeerServiceImpl peer{[this](Frame&& f) {
    received += f.elements() * sizeof(float);
    ++frames;
  }};
  RunningServer server = *StartServer("127.0.0.1:0", {}, ServerPeers::kMembersOnly, &peer);
  Topology topo = *Topology::Create({"v5p:2", 1, 1, "none"});
  GrpcFabric fabric{topo, 0, {{1, absl::StrCat("127.0.0.1:", server.port)}}, peer.queue()};
  ~LoopbackLink() { server.server->Shutdown(std::chrono::system_clock::now()); }

  // Frames lend one filled buffer, as chips lend theirs, so that filling
  // payloads is not part of what is measured.
  Frame MakeFrame(size_t bytes) {
    if (!data || data->size() * sizeof(float) < bytes) data = std::make_shared<Payload>(bytes / sizeof(float), 1.0f);
    Frame f;
    f.header.src_chip = 0;
    f.header.dst_chip = 1;
    f.header.emu_bytes = bytes;
    f.lent.push_back({reinterpret_cast<const std::byte*>(data->data()), bytes, data});
    return f;
  }
  std::shared_ptr<Payload> data;
  void WaitFor(uint64_t bytes) {
    while (received < bytes) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
};

// One PeerService stream's throughput: 1 GiB in `chunk`-sized frames, sent
// as a chip sends them (an unpaced link, up to 8 frames leaving at once).
TransferRate GrpcStreamRate(size_t chunk) {
  LoopbackLink link;
  LinkSender sender({9e10, 1e-6}, /*time_scale=*/0, link.fabric);
  const uint64_t total = 1ull << 30;
  (void)link.fabric.Deliver(link.MakeFrame(chunk));  // warm-up: connection and windows
  link.WaitFor(chunk);
  link.received = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = ProcessCpuSeconds();
  for (uint64_t sent = 0; sent < total; sent += chunk) sender.Enqueue(link.MakeFrame(chunk));
  link.WaitFor(total);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {total / s, total / (ProcessCpuSeconds() - cpu0)};
}

void PointToPointTable() {
  std::printf("\n== 2. Point-to-point PeerService stream over loopback (one directed link, 1 GiB) ==\n");
  std::printf("%-10s %10s %16s\n", "chunk", "GB/s", "GB per CPU-s");
  for (size_t chunk : {64u << 10, 256u << 10, 1u << 20, 4u << 20}) {
    const TransferRate rate = GrpcStreamRate(chunk);
    std::printf("%-10s %10.2f %16.2f\n", absl::StrCat(chunk >> 10, "KiB").c_str(), rate.bytes_per_s / 1e9,
                rate.bytes_per_cpu_s / 1e9);
  }
}

// One frame at a time over a PeerService stream, sent as a chip sends it:
// the time from handing it to the link until the receiving end has it,
// median of 2000.
void HopLatencyTable() {
  std::printf("\n== 2b. One hop over a PeerService stream (loopback, one frame in flight), median us ==\n");
  std::printf("%-10s %10s\n", "frame", "us");
  LoopbackLink link;
  LinkSender sender({9e10, 1e-6}, /*time_scale=*/0, link.fabric);
  for (size_t bytes : {size_t{0}, size_t{4} << 10, size_t{64} << 10, size_t{1} << 20}) {
    std::vector<double> us;
    for (int i = 0; i < 2000; ++i) {
      Frame f = bytes > 0 ? link.MakeFrame(bytes) : Frame{};
      f.header.dst_chip = 1;
      const uint64_t want = link.frames + 1;
      const auto t0 = std::chrono::steady_clock::now();
      sender.Enqueue(std::move(f));
      while (link.frames < want) std::this_thread::yield();
      us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(us.begin(), us.end());
    std::printf("%-10zu %10.1f\n", bytes, us[us.size() / 2]);
  }
}

void PacedTable() {
  std::printf("\n== 3. Paced link (v5p ICI, 9e10 B/s emulated) over gRPC, 1 MiB chunks, 2 s each ==\n");
  std::printf("%-12s %12s %14s %14s %8s\n", "time scale", "configured", "achieved", "achieved/conf", "");
  for (double mbps : {10.0, 50.0, 200.0, 1000.0}) {
    LoopbackLink link;
    const double scale = 9e10 / (mbps * 1e6);
    LinkSender sender({9e10, 1e-6}, scale, link.fabric);
    const uint64_t chunk = 1 << 20;
    const uint64_t frames = std::max<uint64_t>(4, static_cast<uint64_t>(mbps * 1e6 * 2 / chunk));
    const auto t0 = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < frames; ++i) sender.Enqueue(link.MakeFrame(chunk));
    link.WaitFor(frames * chunk);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The last frame is received when its transmission starts; count the
    // bytes whose transmission had finished: frames - 1.
    const double achieved = (frames - 1) * static_cast<double>(chunk) / s;
    std::printf("%-12.0f %9.1f MB/s %11.1f MB/s %14.3f\n", scale, mbps, achieved / 1e6, achieved / (mbps * 1e6));
  }
}

// The busbw no data path can beat on this machine. Over 8 workers x 1 chip
// every planned transfer crosses a socket, so tpuemu's socket bytes are the
// plan's. Two rates bound how fast they can move: plain TCP sockets with
// nothing else to do (the kernel's floor, for any transport), and a gRPC
// stream's bytes per CPU-second times the cores (for gRPC, with none of
// tpuemu's own work counted). "Least any algorithm" is each rank's
// unavoidable receive volume (all-to-all straight to each destination, as
// MPI_Alltoall; not along the ring), at the plain TCP rate.
void CeilingsTable() {
  constexpr int kPairs = 16;  // the 16 directed links of an 8-chip bi-ring
  std::printf("\n== 4. Ceilings: plain TCP sockets over loopback (%d pairs, 1 MiB writes), and one gRPC stream ==\n",
              kPairs);
  TransferRate tcp, grpc;
  for (int r = 0; r < 3; ++r) {
    const TransferRate a = RawTcpLoopbackRate(kPairs, 1 << 20, 2ull << 30), b = GrpcStreamRate(1 << 20);
    if (a.bytes_per_s > tcp.bytes_per_s) tcp = a;
    if (b.bytes_per_cpu_s > grpc.bytes_per_cpu_s) grpc = b;
  }
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  const double grpc_rate = grpc.bytes_per_cpu_s * cores;
  std::printf("plain TCP: %.2f GB/s aggregate (%.2f GB per CPU-s); gRPC stream, 1 MiB frames: %.2f GB per CPU-s x %d "
              "cores = %.2f GB/s (best of 3 each)\n",
              tcp.bytes_per_s / 1e9, tcp.bytes_per_cpu_s / 1e9, grpc.bytes_per_cpu_s / 1e9, cores, grpc_rate / 1e9);
  std::printf("busbw ceilings at n = 8, 64 MiB f32: socket bytes / rate, nothing else counted\n");
  std::printf("%-15s %12s %10s %10s %14s %10s\n", "op", "tpuemu MiB", "TCP ceil", "gRPC ceil", "least algo MiB",
              "TCP ceil");
  const Topology topo = *Topology::Create({"v5p:8", 1, 1, "auto"});
  for (CollectiveOp op : kOps) {
    CollectiveSpec spec;
    spec.op = op;
    spec.axes = {Axis::kX};
    spec.bytes = 64 << 20;
    spec.dtype_bytes = 4;
    const CollectivePlan plan = *CollectivePlan::Create(topo, spec);
    double ours = 0;
    for (const PlannedTransfer& t : plan.transfers()) ours += t.elements() * sizeof(float);
    const int n = plan.group_size();
    const double v = static_cast<double>(spec.bytes), per_rank = op == CollectiveOp::kAllToAll ? v / n : v;
    const double least = (op == CollectiveOp::kAllReduce ? 2 : 1) * per_rank * (n - 1);
    auto ceiling = [&](double socket_bytes, double rate) {
      return per_rank * BusFactor(op, n) / (socket_bytes / rate) / 1e9;
    };
    std::printf("%-15s %12.0f %10.3f %10.3f %14.0f %10.3f\n", OpName(op).c_str(), ours / (1 << 20),
                ceiling(ours, tcp.bytes_per_s), ceiling(ours, grpc_rate), least / (1 << 20),
                ceiling(least, tcp.bytes_per_s));
  }
}

}  // namespace
}  // namespace tpuemu

int main(int argc, char** argv) {
  tpuemu::CatchInterrupts();  // first: before any thread starts
  const std::string only = argc > 1 ? argv[1] : "all";
  if (argc > 2 || (only != "all" && only != "collectives" && only != "p2p" && only != "paced" && only != "ceilings")) {
    const bool help = only == "--help" || only == "-h";
    std::fprintf(help ? stdout : stderr,
                 "usage: datapath_bench [all|collectives|p2p|paced|ceilings]\n"
                 "  collectives: busbw of each collective at n = 8 on three layouts of worker processes (best of 3)\n"
                 "  p2p: one PeerService stream's throughput and a frame's hop latency\n"
                 "  paced: paced links' achieved against configured rate\n"
                 "  ceilings: what plain TCP sockets over loopback allow each collective\n"
                 "bench/datapath.sh runs it beside OpenMPI (docs/benchmarks.md)\n");
    return help ? 0 : 2;
  }
  // Ctrl-C or SIGTERM: the pod of the moment stops too.
  const tpuemu::OnInterrupt stop_pod([] {
    std::lock_guard<std::mutex> no_more(tpuemu::pod_start);
    tpuemu::StopPod();
  });
  tpuemu::PrepareProcessForDataPath();
  tpuemu::PrintMachine();
  std::printf("%s\n", tpuemu::UseWorkersTcpCongestion().c_str());
  if (only == "all" || only == "collectives") tpuemu::CollectiveTable(3);
  if (only == "all" || only == "p2p") tpuemu::PointToPointTable();
  if (only == "all" || only == "p2p") tpuemu::HopLatencyTable();
  if (only == "all" || only == "paced") tpuemu::PacedTable();
  if (only == "all" || only == "ceilings") tpuemu::CeilingsTable();
  return tpuemu::any_failed ? 1 : 0;
}
