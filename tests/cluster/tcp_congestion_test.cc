// A worker's peer connections take the TCP congestion control it chose, at
// both ends (services/tcp_congestion.h), and a name the machine refuses is
// refused by name or, as a default, falls back to the machine's own.
#include "services/tcp_congestion.h"

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

// This process's TCP sockets (descriptor -> congestion control).
std::map<int, std::string> TcpSockets() {
  std::map<int, std::string> sockets;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(entry.path().filename().string());
    char name[32] = {};
    socklen_t len = sizeof(name);
    if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) == 0) sockets[fd] = std::string(name);
  }
  return sockets;
}

// The congestion control of every TCP socket a server and a channel to it
// opened: its listener, the channel's socket and the one the server accepted.
std::set<std::string> ControlsOfANewConnection() {
  const std::map<int, std::string> before = TcpSockets();
  auto server = StartServer("127.0.0.1:0", {});
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return {};
  grpc::ChannelArguments args;
  ApplyPeerTcpCongestion(args);
  auto channel = MakeChannel("127.0.0.1:" + std::to_string(server->port), args);
  EXPECT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10)));
  std::set<std::string> controls;
  int opened = 0;
  for (const auto& [fd, control] : TcpSockets()) {
    if (before.count(fd)) continue;
    controls.insert(control);
    ++opened;
  }
  EXPECT_GE(opened, 3) << "a listener, a channel's socket and an accepted one";
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
  EXPECT_NE(message.find("TPUEMU_PEER_TCP_CONGESTION 'no-such-control'"), std::string::npos) << message;
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
