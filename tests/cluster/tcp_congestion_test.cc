// A worker's peer connections take the TCP congestion control it chose, at
// both ends (services/tcp_congestion.h), and a name the machine refuses is
// refused by name or, as a default, falls back to the machine's own.
#include "services/tcp_congestion.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "gtest/gtest.h"
#include "services/server.h"
#include "services/transport_security.h"

namespace tpuemu {
namespace {

int PortOf(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(address).sin_port);
  if (address.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
  return -1;
}

// The congestion control of each of this process's TCP sockets on `port`,
// this end's or the other's: a server's listener, the sockets it accepted and
// those of channels to it (descriptor -> congestion control).
std::map<int, std::string> SocketsOnPort(int port) {
  std::map<int, std::string> sockets;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(entry.path().filename().string());
    char name[32] = {};
    socklen_t len = sizeof(name);
    if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
    const bool on_port = (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) == 0 && PortOf(local) == port) ||
                         (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0 && PortOf(peer) == port);
    if (on_port) sockets[fd] = name;
  }
  return sockets;
}

// The congestion controls of the TCP sockets of a new server and a channel
// to it: its listener, the channel's socket and the one the server accepted.
std::set<std::string> ControlsOfANewConnection() {
  auto server = StartServer("127.0.0.1:0", {});
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return {};
  grpc::ChannelArguments args;
  ApplyPeerTcpCongestion(args);
  auto channel = MakeChannel("127.0.0.1:" + std::to_string(server->port), args);
  EXPECT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10)));
  const std::map<int, std::string> sockets = SocketsOnPort(server->port);
  EXPECT_GE(sockets.size(), 3u) << "a listener, a channel's socket and an accepted one";
  std::set<std::string> controls;
  for (const auto& [fd, control] : sockets) controls.insert(control);
  server->server->Shutdown(std::chrono::system_clock::now());
  return controls;
}

// One of the controls every Linux build has that is not this machine's
// default, so that taking the choice shows.
std::string NotTheDefault() { return SystemTcpCongestion() == "reno" ? "cubic" : "reno"; }

TEST(TcpCongestionTest, BothEndsOfAPeerConnectionTakeTheChoice) {
  const std::string chosen = NotTheDefault();
  ASSERT_EQ(ChoosePeerTcpCongestion(chosen, true, "--peer-tcp-congestion").value_or(""), chosen);
  EXPECT_EQ(ControlsOfANewConnection(), std::set<std::string>{chosen});

  ASSERT_EQ(ChoosePeerTcpCongestion(kSystemCongestion, true, "--peer-tcp-congestion").value_or(""),
            kSystemCongestion);
  EXPECT_EQ(ControlsOfANewConnection(), std::set<std::string>{SystemTcpCongestion()});
}

TEST(TcpCongestionTest, ANameTheMachineRefusesIsNamedWithWhatItAllows) {
  const std::string chosen = NotTheDefault();
  ASSERT_TRUE(ChoosePeerTcpCongestion(chosen, true, "--peer-tcp-congestion").ok());
  auto refused = ChoosePeerTcpCongestion("no-such-control", true, "TPUEMU_PEER_TCP_CONGESTION");
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(refused.status().message());
  EXPECT_NE(message.find("TPUEMU_PEER_TCP_CONGESTION 'no-such-control': this kernel does not have it"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("allowed here: "), std::string::npos) << message;
  EXPECT_NE(message.find("\"system\" for the machine's default (" + SystemTcpCongestion() + ")"), std::string::npos)
      << message;
  EXPECT_EQ(PeerTcpCongestion(), chosen) << "a refused name changes nothing";

  // Not given by the user: the machine's default, with a warning.
  EXPECT_EQ(ChoosePeerTcpCongestion("no-such-control", false, "--peer-tcp-congestion").value_or(""),
            kSystemCongestion);
  EXPECT_EQ(PeerTcpCongestion(), kSystemCongestion);
}

}  // namespace
}  // namespace tpuemu
