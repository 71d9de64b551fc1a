// How workers take their places in a pod: claimed (flags, TPU/MEGASCALE
// environment, StatefulSet ordinals) or assigned by the coordinator, and the
// refusals that name both sides. Real WorkerService servers on free ports, so
// that "is the holder of a place alive" is asked over gRPC as in a pod.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/coordinator.h"
#include "core/tensor/matmul_gate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/grpc_fabric.h"
#include "services/peer_service.h"
#include "services/server.h"
#include "services/worker_client.h"
#include "services/worker_service.h"
#include "spdlog/sinks/ringbuffer_sink.h"
#include "spdlog/spdlog.h"
#include "worker/worker_node.h"

namespace tpuemu {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// A worker process's server, without the process.
struct FakeHost {
  FakeHost() : node(-1, GrpcFabricFactory(peer)), service(&node) {
    auto s = StartServer("127.0.0.1:0", {&service}, ServerPeers::kMembersOnly, &peer);
    EXPECT_TRUE(s.ok()) << s.status();
    server = *std::move(s);
    address = absl::StrCat("127.0.0.1:", server.port);
  }
  ~FakeHost() { Stop(); }
  void Stop() {
    if (server.server) server.server->Shutdown(std::chrono::system_clock::now());
    server.server.reset();
  }
  PeerServiceImpl peer{[this](Frame&& f) { node.DeliverPeerFrame(std::move(f)); }};  // before the node, which uses its queue
  WorkerNode node;
  WorkerServiceImpl service;
  RunningServer server;
  std::string address;
};

class RegistrationTest : public ::testing::Test {
 protected:
  // v5p:2x2 in 2 slices of 2 hosts (2 chips each): 4 places.
  void SetUp() override {
    CoordinatorOptions options;
    options.topology = {"v5p:2x2", 2, 2, "auto"};
    options.heartbeat_timeout = absl::Hours(1);  // liveness is asked, not timed out, here
    auto c = Coordinator::Create(options, MakeGrpcWorkerClient);
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = *std::move(c);
    for (int i = 0; i < 5; ++i) hosts_.push_back(std::make_unique<FakeHost>());
  }

  absl::StatusOr<v1::RegisterWorkerResponse> Register(const FakeHost& h, int slice, int host,
                                                      const std::string& source = "test", int num_slices = 0,
                                                      const std::string& machine = "") {
    v1::RegisterWorkerRequest req;
    req.set_slice(slice);
    req.set_host(host);
    req.set_address(h.address);
    req.set_place_source(source);
    req.set_num_slices(num_slices);
    req.set_machine(machine);
    return coordinator_->RegisterWorker(req);
  }

  std::unique_ptr<Coordinator> coordinator_;
  std::vector<std::unique_ptr<FakeHost>> hosts_;
};

TEST_F(RegistrationTest, AssignedPlacesFillThePodInOrderAndAWorkerBackKeepsItsPlace) {
  std::vector<int> places;
  for (int i = 0; i < 4; ++i) {
    auto r = Register(*hosts_[i], -1, -1);
    ASSERT_TRUE(r.ok()) << r.status();
    places.push_back(r->global_host());
    EXPECT_EQ(r->slice(), r->global_host() / 2);
    EXPECT_EQ(r->host(), r->global_host() % 2);
  }
  EXPECT_EQ(places, (std::vector<int>{0, 1, 2, 3}));
  // The same worker (its address) registering again gets its own place back.
  auto again = Register(*hosts_[2], -1, -1);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->global_host(), 2);
}

TEST_F(RegistrationTest, AFullPodRefusesOneWorkerTooManyWithWhatToDo) {
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Register(*hosts_[i], -1, -1).ok());
  auto r = Register(*hosts_[4], -1, -1);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(r.status().message(), AllOf(HasSubstr(hosts_[4]->address), HasSubstr("no free place"),
                                          HasSubstr("held by live workers"), HasSubstr("scale the workers to 4")));
}

TEST_F(RegistrationTest, AnAssignedWorkerTakesThePlaceOfOneThatNoLongerAnswers) {
  // A compose container recreated: its predecessor's heartbeats have not lapsed.
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Register(*hosts_[i], -1, -1).ok());
  hosts_[2]->Stop();
  auto r = Register(*hosts_[4], -1, -1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->global_host(), 2);
}

// A port that takes connections (the kernel's backlog) and never answers:
// a worker whose server is slow to answer a new channel (its TLS handshake
// on a busy host), though it heartbeats.
struct SilentPort {
  SilentPort() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), len), 0);
    EXPECT_EQ(listen(fd, 16), 0);
    EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    address = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
  }
  ~SilentPort() { close(fd); }
  int fd = -1;
  std::string address;
};

TEST_F(RegistrationTest, AHolderSlowToAnswerWhileItsHeartbeatsAreFreshKeepsItsPlace) {
  // Seen under compose on 2 busy cores: a third worker took the place of one
  // that had registered a second before and missed the 1 s status call, and
  // the two took it from each other until one used up its restarts.
  SilentPort silent;
  ASSERT_TRUE(Register(*hosts_[0], -1, -1).ok());
  ASSERT_TRUE(Register(*hosts_[1], -1, -1).ok());
  v1::RegisterWorkerRequest req;
  req.set_slice(-1);
  req.set_host(-1);
  req.set_address(silent.address);
  req.set_place_source("test");
  auto held = coordinator_->RegisterWorker(req);
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_TRUE(Register(*hosts_[3], -1, -1).ok());
  auto r = Register(*hosts_[4], -1, -1);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  // Claimed by name, the same: refused, naming the holder.
  auto claim = Register(*hosts_[4], held->slice(), held->host());
  EXPECT_EQ(claim.status().code(), absl::StatusCode::kAlreadyExists) << claim.status();
  EXPECT_THAT(claim.status().message(), HasSubstr(silent.address));
}

TEST_F(RegistrationTest, AssignmentWithinAGivenSlice) {
  auto r = Register(*hosts_[0], 1, -1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->slice(), 1);
  EXPECT_EQ(r->global_host(), 2);
}

TEST_F(RegistrationTest, TwoLiveWorkersClaimingOnePlaceAreRefusedNamingBoth) {
  ASSERT_TRUE(Register(*hosts_[0], 1, 0, "TPU_WORKER_ID=0").ok());
  auto r = Register(*hosts_[1], 1, 0, "MEGASCALE_SLICE_ID=1, TPU_WORKER_ID=0");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(r.status().message(),
              AllOf(HasSubstr(hosts_[0]->address), HasSubstr(hosts_[1]->address), HasSubstr("slice 1 host 0"),
                    HasSubstr("MEGASCALE_SLICE_ID=1, TPU_WORKER_ID=0"), HasSubstr("place from TPU_WORKER_ID=0")));
  // A host index without its slice is not a place.
  EXPECT_EQ(Register(*hosts_[2], -1, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RegistrationTest, AWorkerRestartedOnANewAddressTakesItsPlaceAtOnce) {
  auto first = Register(*hosts_[0], 0, 1);
  ASSERT_TRUE(first.ok());
  hosts_[0]->Stop();  // the process died; its heartbeats have not lapsed yet
  auto second = Register(*hosts_[1], 0, 1);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->global_host(), 1);
  EXPECT_NE(second->incarnation(), first->incarnation());
  EXPECT_EQ(coordinator_->ClusterStatus().workers(0).address(), hosts_[1]->address);
}

TEST_F(RegistrationTest, PlacesOutsideThePodAreRefusedNamingTheSourceAndTheTopology) {
  auto host = Register(*hosts_[0], 0, 2, "TPU_WORKER_ID=2");
  EXPECT_EQ(host.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(host.status().message(),
              AllOf(HasSubstr("TPU_WORKER_ID=2"), HasSubstr(hosts_[0]->address), HasSubstr("host 2 is outside"),
                    HasSubstr("hosts 0 to 1")));
  auto slice = Register(*hosts_[0], 2, 0, "MEGASCALE_SLICE_ID=2");
  EXPECT_EQ(slice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(slice.status().message(), AllOf(HasSubstr("MEGASCALE_SLICE_ID=2"), HasSubstr("slices 0 to 1")));
  auto slices = Register(*hosts_[0], 0, 0, "TPU_WORKER_ID=0", /*num_slices=*/3);
  EXPECT_EQ(slices.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(slices.status().message(), AllOf(HasSubstr("MEGASCALE_NUM_SLICES=3"), HasSubstr("2 slice(s)")));
  EXPECT_TRUE(Register(*hosts_[0], 0, 0, "TPU_WORKER_ID=0", /*num_slices=*/2).ok());
}

TEST_F(RegistrationTest, HeartbeatsOfAReplacedRegistrationAreRefused) {
  auto first = Register(*hosts_[0], 0, 0);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(coordinator_->Heartbeat(0, first->incarnation(), 0).ok());
  hosts_[0]->Stop();
  auto second = Register(*hosts_[1], 0, 0);
  ASSERT_TRUE(second.ok());
  const absl::Status stale = coordinator_->Heartbeat(0, first->incarnation(), 0);
  EXPECT_EQ(stale.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(stale.message(), HasSubstr(hosts_[1]->address));
  EXPECT_TRUE(coordinator_->Heartbeat(0, second->incarnation(), 0).ok());
  // A coordinator that never saw this host (it restarted) says so: the worker registers again.
  EXPECT_EQ(coordinator_->Heartbeat(3, 1, 0).code(), absl::StatusCode::kNotFound);
}

TEST_F(RegistrationTest, EachWorkersResidentMemoryFromItsLastHeartbeatIsInTheClusterStatus) {
  auto place = Register(*hosts_[0], 0, 0);
  ASSERT_TRUE(place.ok());
  EXPECT_EQ(coordinator_->ClusterStatus().workers(0).resident_bytes(), 0u) << "nothing said yet";
  ASSERT_TRUE(coordinator_->Heartbeat(0, place->incarnation(), 300 << 20).ok());
  EXPECT_EQ(coordinator_->ClusterStatus().workers(0).resident_bytes(), 300u << 20);
  ASSERT_TRUE(coordinator_->Heartbeat(0, place->incarnation(), 27 << 20).ok());  // given back once idle
  EXPECT_EQ(coordinator_->ClusterStatus().workers(0).resident_bytes(), 27u << 20);
  // Another process takes the place: the old one's figure is not its own.
  hosts_[0]->Stop();
  ASSERT_TRUE(Register(*hosts_[1], 0, 0).ok());
  EXPECT_EQ(coordinator_->ClusterStatus().workers(0).resident_bytes(), 0u) << "the replaced process's memory";
}

TEST_F(RegistrationTest, WorkersOnOneMachineShareItsCoresForMultiplying) {
  // Three of the pod's four workers say they run on machine "a", one on "b";
  // each may use 4 CPUs. The coordinator's configuration names every
  // worker's machine, and each worker counts its own.
  struct ResetGate {
    ~ResetGate() { ProcessMatmulGate().set_limit(0); }  // as the test found it
  } reset;
  const std::vector<std::string> machines = {"a", "a", "a", "b"};
  for (int i = 0; i < 4; ++i) {
    hosts_[i]->node.share_machine(machines[i], 4);
    auto r = Register(*hosts_[i], -1, -1, "test", 0, machines[i]);
    ASSERT_TRUE(r.ok()) << r.status();
    hosts_[i]->node.set_registration(r->global_host(), r->incarnation());
  }
  for (int waited = 0; waited < 200 && !coordinator_->ClusterStatus().ready(); ++waited) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(coordinator_->ClusterStatus().ready());
  EXPECT_EQ(hosts_[0]->node.matmul_share(), 1);  // 4 CPUs / 3 workers, rounded down
  EXPECT_EQ(hosts_[1]->node.matmul_share(), 1);
  EXPECT_EQ(hosts_[2]->node.matmul_share(), 1);
  EXPECT_EQ(hosts_[3]->node.matmul_share(), 4);  // alone on its machine

  // The third worker registers again, now saying machine "b": every worker
  // is configured again and counts anew, 2 on each machine.
  auto again = Register(*hosts_[2], -1, -1, "test", 0, "b");
  ASSERT_TRUE(again.ok()) << again.status();
  hosts_[2]->node.set_registration(again->global_host(), again->incarnation());
  for (int waited = 0; waited < 200 && hosts_[3]->node.matmul_share() != 2; ++waited) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(hosts_[3]->node.matmul_share(), 2);
  EXPECT_EQ(hosts_[0]->node.matmul_share(), 2);
}

// What the worker logs while the test runs.
class CapturedLog {
 public:
  CapturedLog() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64)), saved_(spdlog::default_logger()) {
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("captured", sink_));
  }
  ~CapturedLog() { spdlog::set_default_logger(saved_); }
  std::string Text() const {
    std::string all;
    for (const std::string& line : sink_->last_formatted()) all += line;
    return all;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> saved_;
};

TEST_F(RegistrationTest, CallsMeantForAReplacedIncarnationAreRefusedAndLogged) {
  // A process registered, then a new one at the same address took its
  // place: a coordinator still holding the first registration must not
  // drive the second process.
  auto first = Register(*hosts_[0], 0, 0);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = Register(*hosts_[0], 0, 0);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_NE(first->incarnation(), second->incarnation());
  hosts_[0]->node.set_registration(second->global_host(), second->incarnation());

  CapturedLog log;
  auto worker = MakeGrpcWorkerClient(hosts_[0]->address);
  const uint64_t stale_incarnation = first->incarnation();
  Cancellation never;
  const absl::Status refused = worker->Abort(stale_incarnation, 7, "test", absl::Seconds(10));
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(refused.message(), AllOf(HasSubstr(absl::StrCat("incarnation ", first->incarnation())),
                                       HasSubstr(absl::StrCat("incarnation ", second->incarnation()))));
  EXPECT_EQ(worker->Configure(stale_incarnation, PodConfig{}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(worker->PrepareJob(stale_incarnation, 7, CollectiveSpec{}, {}, never).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(worker->RunJob(stale_incarnation, 7, 0, {}, never).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(worker->CheckJob(stale_incarnation, 7, never).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(log.Text(), AllOf(HasSubstr(absl::StrCat("refused Abort meant for incarnation ", first->incarnation())),
                                HasSubstr("refused RunJob"), HasSubstr("refused Configure")));
  // The registration the coordinator holds now is served.
  EXPECT_TRUE(worker->Abort(second->incarnation(), 7, "test", absl::Seconds(10)).ok());
}

}  // namespace
}  // namespace tpuemu
