#include "client/connection_failure.h"

#include "gtest/gtest.h"

namespace tpuemu {
namespace {

// The messages are gRPC 1.51's own, as `tpuemu health` and the CLI met them.
TEST(ConnectionFailureTest, ReadsGrpcsReasons) {
  EXPECT_EQ(ClassifyConnectionFailure("failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: "
                                      "Failed to connect to remote host: Connection refused"),
            ConnectionFailure::kRefused);
  EXPECT_EQ(ClassifyConnectionFailure("Socket closed"), ConnectionFailure::kClosed);
  EXPECT_EQ(ClassifyConnectionFailure("Handshake failed"), ConnectionFailure::kClosed);
  // A handshake that failed on the certificate is the other CA, not a closed connection.
  EXPECT_EQ(ClassifyConnectionFailure("failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:5: "
                                      "Ssl handshake failed: SSL_ERROR_SSL: error:0A000086:SSL "
                                      "routines::certificate verify failed"),
            ConnectionFailure::kOtherCa);
  EXPECT_EQ(ClassifyConnectionFailure("DNS resolution failed for nosuchhost.invalid:50051: C-ares status is not "
                                      "ARES_SUCCESS qtype=AAAA name=nosuchhost.invalid is_balancer=0: Domain name not "
                                      "found"),
            ConnectionFailure::kUnresolved);
  EXPECT_EQ(ClassifyConnectionFailure("Deadline Exceeded"), ConnectionFailure::kTimedOut);
  EXPECT_EQ(ClassifyConnectionFailure("something else"), ConnectionFailure::kUnknown);
}

}  // namespace
}  // namespace tpuemu
