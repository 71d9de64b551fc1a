#include "services/tcp_congestion.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <mutex>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "grpc/support/sync.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/version_info.h"
#include "spdlog/spdlog.h"

#if GRPC_CPP_VERSION_MAJOR != 1 || GRPC_CPP_VERSION_MINOR != 51
#error "grpc_socket_mutator below has gRPC 1.51's layout: check it against this gRPC's socket_mutator.h"
#endif

// gRPC 1.51 takes socket options through a grpc_socket_mutator, a struct its
// public headers only name. Its layout there (src/core/lib/iomgr/
// socket_mutator.h): a vtable, then a reference count. The vtable's fourth
// entry (mutate_fd_2) is left null, so gRPC calls mutate_fd for listeners and
// for the sockets of client connections, and nothing for accepted ones
// (which inherit the listener's congestion control).
struct grpc_socket_mutator_vtable {
  bool (*mutate_fd)(int fd, grpc_socket_mutator* mutator);
  int (*compare)(grpc_socket_mutator* a, grpc_socket_mutator* b);
  void (*destroy)(grpc_socket_mutator* mutator);
  void* mutate_fd_2;
};
struct grpc_socket_mutator {
  const grpc_socket_mutator_vtable* vtable;
  gpr_refcount refcount;
};

namespace tpuemu {
namespace {

std::mutex choice_mu;
std::string choice = kSystemCongestion;  // under choice_mu

// gRPC hands back a pointer to `base`, the first member of a standard-layout
// struct: the pointer to the whole.
struct CongestionMutator {
  grpc_socket_mutator base;
  char name[16];  // NUL-terminated: the kernel's TCP_CA_NAME_MAX, no longer name is one
};
static_assert(std::is_standard_layout_v<CongestionMutator> && offsetof(CongestionMutator, base) == 0);

std::string NameOf(grpc_socket_mutator* m) { return reinterpret_cast<CongestionMutator*>(m)->name; }

bool MutateFd(int fd, grpc_socket_mutator* m) {
  // The choice was tried on a socket when it was made; a socket that refuses
  // it after all keeps the machine's default rather than fail a connection.
  SetTcpCongestionOn(fd, NameOf(m));
  return true;
}
int Compare(grpc_socket_mutator* a, grpc_socket_mutator* b) { return NameOf(a).compare(NameOf(b)); }
void Destroy(grpc_socket_mutator* m) { delete reinterpret_cast<CongestionMutator*>(m); }

constexpr grpc_socket_mutator_vtable kVtable = {MutateFd, Compare, Destroy, nullptr};

// A mutator with one reference, owned by the ChannelArguments it is given to.
grpc_socket_mutator* NewMutator(const std::string& name) {
  auto* m = new CongestionMutator{{&kVtable, {}}, {}};
  name.copy(m->name, sizeof(m->name) - 1);
  gpr_ref_init(&m->base.refcount, 1);
  return &m->base;
}

class CongestionOption : public grpc::ServerBuilderOption {
 public:
  explicit CongestionOption(std::string name) : name_(std::move(name)) {}
  void UpdateArguments(grpc::ChannelArguments* args) override { args->SetSocketMutator(NewMutator(name_)); }
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>*) override {}

 private:
  std::string name_;
};

std::string FirstLineOf(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Empty if a socket takes `name`, else why not.
std::string WhyNot(const std::string& name) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return std::strerror(errno);
  const bool ok = SetTcpCongestionOn(fd, name);
  const int error = errno;
  close(fd);
  if (ok) return "";
  if (error == ENOENT) return "this kernel does not have it";
  if (error == EPERM) return "not allowed to processes without CAP_NET_ADMIN";
  return std::strerror(error);
}

}  // namespace

bool SetTcpCongestionOn(int fd, const std::string& name) {
  return setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), name.size()) == 0;
}

std::string SystemTcpCongestion() { return FirstLineOf("/proc/sys/net/ipv4/tcp_congestion_control"); }

std::string ShownTcpCongestion(const std::string& choice) {
  return choice == kSystemCongestion ? absl::StrCat("the machine's default (", SystemTcpCongestion(), ")") : choice;
}

absl::StatusOr<std::string> ChoosePeerTcpCongestion(const std::string& name, bool given, const std::string& field) {
  std::string chosen = name;
  if (name != kSystemCongestion) {
    if (const std::string why = WhyNot(name); !why.empty()) {
      const std::string allowed = FirstLineOf("/proc/sys/net/ipv4/tcp_allowed_congestion_control");
      const std::string available = FirstLineOf("/proc/sys/net/ipv4/tcp_available_congestion_control");
      const std::string problem = absl::StrCat(
          given ? field : absl::StrCat("the default of ", field), " '", name, "': ", why,
          "; allowed here: ", allowed.empty() ? "unknown" : allowed,
          available.empty() || available == allowed ? "" : absl::StrCat(" (with CAP_NET_ADMIN: ", available, ")"),
          ", or \"", kSystemCongestion, "\" for ", ShownTcpCongestion(kSystemCongestion));
      if (given) return absl::InvalidArgumentError(problem);
      spdlog::warn("{}: peer links keep the machine's default", problem);
      chosen = kSystemCongestion;
    }
  }
  std::lock_guard<std::mutex> lock(choice_mu);
  choice = chosen;
  return chosen;
}

std::string PeerTcpCongestion() {
  std::lock_guard<std::mutex> lock(choice_mu);
  return choice;
}

void ApplyPeerTcpCongestion(grpc::ChannelArguments& args) {
  const std::string name = PeerTcpCongestion();
  if (name != kSystemCongestion) args.SetSocketMutator(NewMutator(name));
}

std::unique_ptr<grpc::ServerBuilderOption> PeerTcpCongestionOption() {
  const std::string name = PeerTcpCongestion();
  if (name == kSystemCongestion) return nullptr;
  return std::make_unique<CongestionOption>(name);
}

}  // namespace tpuemu
