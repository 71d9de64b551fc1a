// grpc.health.v1 as every tpuemu server serves it (services/health_service.h):
// what gRPC's own health service answers, on gRPC's synchronous API.
#include "services/health_service.h"

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "services/server.h"

namespace tpuemu {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

TEST(HealthServiceTest, ChecksAndWatchesFollowReadinessAndAWatchEndsAtOnceWhenTheServerStops) {
  auto server = StartServer("127.0.0.1:0", {});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = Health::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server->port),
                                                  grpc::InsecureChannelCredentials()));
  auto check = [&](const std::string& service, HealthCheckResponse::ServingStatus* status) {
    grpc::ClientContext context;
    HealthCheckRequest request;
    request.set_service(service);
    HealthCheckResponse response;
    const grpc::Status s = stub->Check(&context, request, &response);
    *status = response.status();
    return s.error_code();
  };
  HealthCheckResponse::ServingStatus status;
  EXPECT_EQ(check("", &status), grpc::StatusCode::OK);
  EXPECT_EQ(status, HealthCheckResponse::SERVING);  // as gRPC's own starts
  EXPECT_EQ(check(kLivenessService, &status), grpc::StatusCode::OK);
  EXPECT_EQ(status, HealthCheckResponse::SERVING);
  EXPECT_EQ(check("no.such.Service", &status), grpc::StatusCode::NOT_FOUND);

  grpc::ClientContext watch_context;
  HealthCheckRequest everything;
  auto watch = stub->Watch(&watch_context, everything);
  HealthCheckResponse seen;
  ASSERT_TRUE(watch->Read(&seen));
  EXPECT_EQ(seen.status(), HealthCheckResponse::SERVING);
  SetReady(*server, false);
  ASSERT_TRUE(watch->Read(&seen));
  EXPECT_EQ(seen.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(check("", &status), grpc::StatusCode::OK);
  EXPECT_EQ(status, HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(check(kLivenessService, &status), grpc::StatusCode::OK);
  EXPECT_EQ(status, HealthCheckResponse::SERVING) << "liveness stays while the process serves";

  // Stopping: the watch hears NOT_SERVING for liveness too and ends, well
  // within the grace, which the server then does not wait out.
  grpc::ClientContext liveness_context;
  HealthCheckRequest liveness;
  liveness.set_service(kLivenessService);
  auto live_watch = stub->Watch(&liveness_context, liveness);
  ASSERT_TRUE(live_watch->Read(&seen));
  const auto t0 = std::chrono::steady_clock::now();
  StopServer(*server, std::chrono::seconds(10));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  ASSERT_TRUE(live_watch->Read(&seen));
  EXPECT_EQ(seen.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(live_watch->Read(&seen));
  EXPECT_FALSE(watch->Read(&seen));
}

}  // namespace
}  // namespace tpuemu
