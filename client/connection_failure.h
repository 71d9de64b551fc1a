// Why a gRPC call found no server, read from gRPC's own message: the status
// code alone (UNAVAILABLE) does not tell a stopped pod from one that speaks
// TLS to a plaintext client, or checks a certificate against another CA.
// Each command words the advice for its own audience (health_command.cc,
// coordinator_client.cc); this is the one place that reads the message.
#pragma once

#include <string_view>

namespace tpuemu {

enum class ConnectionFailure {
  kOtherCa,  // the server's certificate is not signed by the CA given
  kClosed,   // the server closed the connection: stopping, or TLS met plaintext
  kRefused,     // nothing listens at the address
  kUnresolved,  // the host name did not resolve
  kTimedOut,    // no answer before the deadline
  kUnknown,     // anything else
};

inline ConnectionFailure ClassifyConnectionFailure(std::string_view grpc_message) {
  const auto has = [&](std::string_view s) { return grpc_message.find(s) != std::string_view::npos; };
  if (has("certificate verify failed")) return ConnectionFailure::kOtherCa;
  if (has("Socket closed") || has("andshake")) return ConnectionFailure::kClosed;  // [Hh]andshake
  if (has("Connection refused")) return ConnectionFailure::kRefused;
  if (has("DNS resolution failed")) return ConnectionFailure::kUnresolved;
  if (has("Deadline Exceeded")) return ConnectionFailure::kTimedOut;
  return ConnectionFailure::kUnknown;
}

}  // namespace tpuemu
