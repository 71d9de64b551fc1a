#include "bench/loopback_socket.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "services/tcp_congestion.h"

namespace tpuemu {
namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  return addr;
}

[[noreturn]] void Fail(const char* what) {
  std::perror(what);
  std::exit(1);
}

int NewSocket() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (const std::string choice = PeerTcpCongestion(); fd >= 0 && choice != kSystemCongestion) {
    SetTcpCongestionOn(fd, choice);
  }
  return fd;
}

}  // namespace

std::string UseWorkersTcpCongestion() {
  const char* env = std::getenv("TPUEMU_PEER_TCP_CONGESTION");
  const bool given = env != nullptr && *env != '\0';
  auto chosen = ChoosePeerTcpCongestion(given ? env : kDefaultPeerCongestion, given, "TPUEMU_PEER_TCP_CONGESTION");
  if (!chosen.ok()) {
    std::fprintf(stderr, "%s\n", std::string(chosen.status().message()).c_str());
    std::exit(2);
  }
  if (*chosen == kSystemCongestion) return absl::StrCat("TCP congestion control: ", ShownTcpCongestion(*chosen));
  return absl::StrCat("TCP congestion control: ", *chosen, " on tpuemu's and these sockets (the machine's default: ",
                      SystemTcpCongestion(), "; TPUEMU_PEER_TCP_CONGESTION=system keeps it)");
}

LoopbackListener ListenOnLoopback(int backlog) {
  const int fd = NewSocket();  // accepted sockets inherit its congestion control
  sockaddr_in addr = Loopback(0);
  socklen_t len = sizeof(addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(fd, backlog) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    Fail("listen on 127.0.0.1");
  }
  return {fd, ntohs(addr.sin_port)};
}

int ConnectToLoopback(int port) {
  const int fd = NewSocket();
  const sockaddr_in addr = Loopback(port);
  if (fd < 0 || connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) Fail("connect to 127.0.0.1");
  return fd;
}

}  // namespace tpuemu
