// A server listens on the one port it reports (the port file, the log, the
// address a worker registers), and nowhere else: gRPC once cloned every
// port-0 listener onto a second, unreported port that served the whole API.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "services/server.h"

namespace tpuemu {
namespace {

// This process's listening TCP ports: its socket descriptors matched against
// the kernel's tables' rows in state LISTEN (0A).
std::set<int> ListeningPorts() {
  std::set<std::string> inodes;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code error;
    const std::string target = std::filesystem::read_symlink(fd.path(), error).string();
    if (!error && target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  std::set<int> ports;
  for (const char* table : {"/proc/self/net/tcp", "/proc/self/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // column names
    while (std::getline(in, line)) {
      std::istringstream row(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      row >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
      if (state == "0A" && inodes.count(inode)) ports.insert(std::stoi(local.substr(local.find(':') + 1), nullptr, 16));
    }
  }
  return ports;
}

TEST(ServerPortsTest, AServerOnPortZeroListensOnExactlyThePortItReports) {
  const std::set<int> before = ListeningPorts();
  auto server = StartServer("127.0.0.1:0", {});
  ASSERT_TRUE(server.ok()) << server.status();
  std::set<int> opened;
  for (int port : ListeningPorts()) {
    if (!before.count(port)) opened.insert(port);
  }
  EXPECT_EQ(opened, std::set<int>{server->port});
  server->server->Shutdown(std::chrono::system_clock::now());
}

TEST(ServerPortsTest, ASecondServerCannotTakeAPortInUse) {
  auto first = StartServer("127.0.0.1:0", {});
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = StartServer("127.0.0.1:" + std::to_string(first->port), {});
  EXPECT_FALSE(second.ok()) << "two servers shared port " << first->port;
  first->server->Shutdown(std::chrono::system_clock::now());
}

}  // namespace
}  // namespace tpuemu
