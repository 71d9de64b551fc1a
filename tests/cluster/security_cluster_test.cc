// A pod nobody uninvited can use (issue 17): a whole pod over real gRPC with
// the pod's credentials (services/credentials.h) runs a collective over
// mutual TLS between coordinator, workers and peers; a client without a
// token, with a wrong one, or in plaintext is refused, a read-only token reads
// but cannot submit or cancel, a client's token cannot register a worker, and
// a peer without the pod's certificate (none, or another CA's) reaches no
// worker RPC, health included.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "client/client_security.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "services/http_server.h"
#include "services/credentials.h"
#include "services/proto_conv.h"
#include "services/transport_security.h"
#include "tests/cluster/test_pod.h"
#include "tpuemu/v1/services.grpc.pb.h"

namespace tpuemu {
namespace {

using ::testing::HasSubstr;

std::string FreshDir(const std::string& name) {
  const std::string dir = (std::filesystem::temp_directory_path() / (name + std::to_string(getpid()))).string();
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(CreateCredentials(dir).ok());
  return dir;
}

TEST(CredentialsTest, AreMadeOnlyIntoANewOrEmptyDirectory) {
  // A directory with other files in it was filled (and, with a uid, given away).
  const std::string dir = FreshDir("tpuemu-credentials-twice-");
  const absl::Status again = CreateCredentials(dir);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.message(), HasSubstr("is not empty (it holds "));
  const std::string full = (std::filesystem::temp_directory_path() / ("tpuemu-full-" + std::to_string(getpid()))).string();
  std::filesystem::remove_all(full);
  std::filesystem::create_directory(full);
  std::ofstream(full + "/job.yaml") << "steps: 1\n";
  EXPECT_THAT(CreateCredentials(full).message(), HasSubstr("is not empty (it holds job.yaml)"));
  EXPECT_FALSE(std::filesystem::exists(full + "/ca.pem"));
  std::filesystem::remove_all(full);
  std::filesystem::remove_all(dir);
  // An empty directory anybody may write in is made its owner's alone.
  std::filesystem::create_directory(full);
  chmod(full.c_str(), 0777);
  ASSERT_TRUE(CreateCredentials(full).ok());
  EXPECT_EQ(std::filesystem::status(full).permissions(), std::filesystem::perms::owner_all);
  std::filesystem::remove_all(full);
  // A file is no directory to make them in.
  std::ofstream(full) << "a file";
  EXPECT_THAT(CreateCredentials(full).message(), HasSubstr("is not a directory"));
  std::filesystem::remove(full);
}

TEST(CredentialsTest, ATokenFileOfAnyNameLosesTheNewlineAroundIt) {
  // A Secret mounted under another name, or a copy: its newline was kept, and the token refused.
  const std::string dir = FreshDir("tpuemu-token-name-");
  std::ofstream(dir + "/read.txt") << "  s3cret-token\n";
  auto token = ReadSecretFile(dir + "/read.txt", "token file");
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "s3cret-token");
  std::filesystem::remove_all(dir);
}

// The web view's token: ?token= once, then a cookie named by the port, so
// that a browser (which sends a host's cookies to every port on it) never
// sends one pod's token to another's server, and a stale cookie does not
// hide the token just opened.
TEST(HttpTokenTest, TheCookieIsThePortsOwnAndATokenInTheAddressWins) {
  auto served = HttpServer::Start("127.0.0.1", 0, {{"/page", Constant("text/plain", [] { return "ok"; })}},
                                  [](const std::string& token) { return token == "right"; });
  ASSERT_TRUE(served.ok()) << served.status();
  const int port = (*served)->port();
  const std::string cookie = "tpuemu_token_" + std::to_string(port);
  httplib::Client client("127.0.0.1", port);
  auto first = client.Get("/page?token=right");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 200);
  EXPECT_THAT(first->get_header_value("Set-Cookie"), HasSubstr(cookie + "=right;"));
  auto with_cookie = client.Get("/page", {{"Cookie", cookie + "=right"}});
  ASSERT_TRUE(with_cookie);
  EXPECT_EQ(with_cookie->status, 200);
  auto stale = client.Get("/page?token=right", {{"Cookie", cookie + "=wrong"}});
  ASSERT_TRUE(stale);
  EXPECT_EQ(stale->status, 200) << "a stale cookie hid the token in the address";
  auto another_ports = client.Get("/page", {{"Cookie", "tpuemu_token_1=right; tpuemu_token=right"}});
  ASSERT_TRUE(another_ports);
  EXPECT_EQ(another_ports->status, 401) << "another port's cookie was taken for this one's";
}

TEST(HttpTokenTest, AnIpv6ListenAddressIsServedAsWritten) {
  // --listen '[::1]:0' gave "cannot serve HTTP on [::1]:0": the brackets went to bind.
  if (!std::filesystem::exists("/proc/sys/net/ipv6/conf/lo")) GTEST_SKIP() << "no IPv6 on this machine";
  auto served = HttpServer::Start("[::1]", 0, {{"/page", Constant("text/plain", [] { return "ok"; })}});
  ASSERT_TRUE(served.ok()) << served.status();
  httplib::Client client("::1", (*served)->port());
  auto page = client.Get("/page");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->body, "ok");
}

TEST(HttpTokenTest, ASecondServerOnAPortInUseIsRefused) {
  // cpp-httplib's default SO_REUSEPORT let a local pod's workers bind the
  // coordinator's port (TPUEMU_HTTP_PORT in their environment) without an
  // error, and take a share of its scrapes and web-view requests.
  auto first = HttpServer::Start("127.0.0.1", 0, {{"/page", Constant("text/plain", [] { return "first"; })}});
  ASSERT_TRUE(first.ok()) << first.status();
  const int port = (*first)->port();
  auto second = HttpServer::Start("127.0.0.1", port, {{"/page", Constant("text/plain", [] { return "second"; })}});
  ASSERT_FALSE(second.ok()) << "a second server bound port " << port;
  EXPECT_THAT(second.status().message(), HasSubstr("the port is taken"));
  httplib::Client client("127.0.0.1", port);
  for (int i = 0; i < 8; ++i) {
    auto page = client.Get("/page");
    ASSERT_TRUE(page);
    EXPECT_EQ(page->body, "first");
  }
}

class SecurityClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshDir("tpuemu-pod-credentials-");
    stranger_dir_ = FreshDir("tpuemu-stranger-credentials-");
    auto member = LoadMemberSecurity(dir_, "test");
    ASSERT_TRUE(member.ok()) << member.status();
    member_ = *member;
    SetProcessSecurity(member_);
    pod_ = std::make_unique<TestPod>(TopologyRequest{"v5p:8", 1, 4, "auto"}, 0);
    coordinator_ = pod_->ServeCoordinator();
  }
  void TearDown() override {
    pod_.reset();
    SetProcessSecurity(TransportSecurity::Insecure());
    std::filesystem::remove_all(dir_);
    std::filesystem::remove_all(stranger_dir_);
  }

  // A client of the coordinator: TLS checked against the pod's CA, with `token`.
  std::unique_ptr<v1::CoordinatorService::Stub> Client(const std::string& token) const {
    TransportSecurity client;
    client.tls = true;
    client.ca_pem = member_.ca_pem;
    client.token = token;
    return v1::CoordinatorService::NewStub(MakeChannel(coordinator_, grpc::ChannelArguments(), client));
  }
  std::string Token(const char* file) const { return *ReadSecretFile(dir_ + "/" + file, "token"); }

  std::string dir_, stranger_dir_, coordinator_;
  TransportSecurity member_;
  std::unique_ptr<TestPod> pod_;
};

grpc::Status Status(v1::CoordinatorService::Stub& stub) {
  grpc::ClientContext context;
  v1::ClusterStatus status;
  return stub.GetClusterStatus(&context, v1::ClusterStatusRequest(), &status);
}

grpc::Status Cancel(v1::CoordinatorService::Stub& stub) {
  grpc::ClientContext context;
  v1::CancelJobRequest request;
  request.set_id("job-1");
  v1::Job job;
  return stub.CancelJob(&context, request, &job);
}

grpc::Status SubmitAllGather(v1::CoordinatorService::Stub& stub, v1::Job* job) {
  CollectiveSpec spec;
  spec.axes = {Axis::kX};
  spec.bytes = 1 << 20;
  v1::SubmitJobRequest request;
  *request.mutable_collective() = ToProto(spec);
  grpc::ClientContext context;
  return stub.SubmitJob(&context, request, job);
}

TEST_F(SecurityClusterTest, TheAdminTokenRunsACollectiveOverMutualTls) {
  auto admin = Client(Token("admin.token"));
  v1::Job job;
  const grpc::Status submitted = SubmitAllGather(*admin, &job);
  ASSERT_TRUE(submitted.ok()) << submitted.error_message();
  const v1::Job done = pod_->Wait(job.id());
  EXPECT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.error();
  EXPECT_TRUE(done.result().correct());  // its chunks crossed the workers' peer links over mutual TLS
  EXPECT_TRUE(Cancel(*admin).ok());
}

TEST_F(SecurityClusterTest, ClientsWithoutTheRightTokenAreRefused) {
  const grpc::Status none = Status(*Client(""));
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(none.error_message(), HasSubstr("no credentials: present the pod's token"));

  const grpc::Status wrong = Status(*Client("0123456789abcdef"));
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(wrong.error_message(), HasSubstr("the token was not accepted"));

  // Another pod's admin token is a wrong token here.
  const grpc::Status other = Status(*Client(*ReadSecretFile(stranger_dir_ + "/admin.token", "token")));
  EXPECT_EQ(other.error_code(), grpc::StatusCode::UNAUTHENTICATED);

  auto read = Client(Token("read.token"));
  EXPECT_TRUE(Status(*read).ok());
  const grpc::Status cancel = Cancel(*read);
  EXPECT_EQ(cancel.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(cancel.error_message(), HasSubstr("a read-only token cannot cancel jobs: use the admin token"));
  v1::Job job;
  EXPECT_EQ(SubmitAllGather(*read, &job).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(pod_->coordinator().ListJobs().jobs().empty());

  // A client's token is not a worker's certificate.
  grpc::ClientContext context;
  v1::RegisterWorkerRequest request;
  v1::RegisterWorkerResponse response;
  const grpc::Status registered = Client(Token("admin.token"))->RegisterWorker(&context, request, &response);
  EXPECT_EQ(registered.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(registered.error_message(), HasSubstr("register a worker is for the pod's workers"));

  // Plaintext reaches nothing, health included.
  auto plain = v1::CoordinatorService::NewStub(
      MakeChannel(coordinator_, grpc::ChannelArguments(), TransportSecurity::Insecure()));
  EXPECT_EQ(Status(*plain).error_code(), grpc::StatusCode::UNAVAILABLE);
  auto health = grpc::health::v1::Health::NewStub(MakeChannel(coordinator_, grpc::ChannelArguments(), [&] {
    TransportSecurity no_token;
    no_token.tls = true;
    no_token.ca_pem = member_.ca_pem;
    return no_token;
  }()));
  grpc::ClientContext health_context;
  grpc::health::v1::HealthCheckResponse serving;
  EXPECT_EQ(health->Check(&health_context, grpc::health::v1::HealthCheckRequest(), &serving).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(SecurityClusterTest, APeerWithoutThePodsCertificateReachesNoWorker) {
  auto stranger = LoadMemberSecurity(stranger_dir_, "test");
  ASSERT_TRUE(stranger.ok());
  TransportSecurity no_cert = member_;  // checks the worker against the right CA, presents nothing
  no_cert.cert_pem.clear();
  no_cert.key_pem.clear();
  TransportSecurity other_ca = *stranger;  // another pod's member, trusting the pod's CA to get that far
  other_ca.ca_pem = member_.ca_pem;
  const std::pair<const char*, TransportSecurity> peers[] = {
      {"no certificate", no_cert}, {"another CA's certificate", other_ca}, {"plaintext", TransportSecurity::Insecure()}};
  for (const auto& [who, security] : peers) {
    auto channel = MakeChannel(pod_->address(0), grpc::ChannelArguments(), security);
    auto worker = v1::WorkerService::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::WorkerStatus status;
    const grpc::Status s = worker->GetStatus(&context, v1::WorkerStatusRequest(), &status);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << who << ": " << s.error_message();
    auto health = grpc::health::v1::Health::NewStub(channel);
    grpc::ClientContext health_context;
    health_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::health::v1::HealthCheckResponse serving;
    EXPECT_FALSE(health->Check(&health_context, grpc::health::v1::HealthCheckRequest(), &serving).ok()) << who;
  }
  // The pod's own certificate gets an answer.
  auto member = v1::WorkerService::NewStub(MakeChannel(pod_->address(0), grpc::ChannelArguments(), member_));
  grpc::ClientContext context;
  v1::WorkerStatus status;
  EXPECT_TRUE(member->GetStatus(&context, v1::WorkerStatusRequest(), &status).ok());
}

}  // namespace
}  // namespace tpuemu
