// The TCP congestion control of a worker's peer connections. Linux paces
// every segment of a BBR connection with a timer; over loopback that pacing
// cost a bare gRPC ring a sixth to a quarter of its bandwidth at 8 and 64 MiB
// against CUBIC on a machine whose default is BBR (docs/benchmarks.md,
// "congestion control"), and tpuemu's workers paid it on every hop.
// A worker therefore chooses for its own connections (CUBIC unless told
// otherwise), at both ends of its peer links: on the listener its server
// accepts them on (accepted sockets inherit it; the coordinator's and health
// probes' connections to that server get it too) and on the channels it opens
// to its peers.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace tpuemu {

// "system" keeps the machine's default (net.ipv4.tcp_congestion_control).
inline constexpr char kSystemCongestion[] = "system";
inline constexpr char kDefaultPeerCongestion[] = "cubic";

// Sets `name` on a socket; false (errno set) where the kernel refuses it.
bool SetTcpCongestionOn(int fd, const std::string& name);

// Makes `name` the process's choice for the peer channels and servers it
// makes from now on, once a socket has taken it. When the kernel refuses it,
// a name the user gave (`given`, through `field`) is an error naming the
// field, the value, why and what this machine allows; the default falls back
// to the machine's own with a warning. Returns the choice in use. Until
// called: "system".
absl::StatusOr<std::string> ChoosePeerTcpCongestion(const std::string& name, bool given, const std::string& field);
std::string PeerTcpCongestion();

// What the machine's sockets get unless told (for reports).
std::string SystemTcpCongestion();
// A choice as reports show it: its name, or "the machine's default (NAME)".
std::string ShownTcpCongestion(const std::string& choice);

// The process's choice on the sockets of channels built with `args`.
void ApplyPeerTcpCongestion(grpc::ChannelArguments& args);
// The same for a server's listeners (nullptr for "system").
std::unique_ptr<grpc::ServerBuilderOption> PeerTcpCongestionOption();

}  // namespace tpuemu
