// How this process's gRPC servers and channels protect themselves (issue 17).
//
// A pod's members (the coordinator and its workers) hold the certificate
// the pod's CA signed for them (services/credentials.h) and use mutual TLS
// with each other: a worker's server takes only members (its WorkerService
// and PeerService, health included); the coordinator's takes members (for
// registration and heartbeats) and clients that present a bearer token
// (TokenRole). Clients (the CLI, the Python client) check the coordinator's
// certificate against the pod's CA and present a token on every call.
// Plaintext is a setting of its own (`--insecure`), never a fallback.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/server_credentials.h"

namespace tpuemu {

struct TransportSecurity {
  bool tls = false;               // false: plaintext, as asked with --insecure
  std::string ca_pem;             // the pod's CA, which peers' certificates must chain to
  std::string cert_pem, key_pem;  // a member's certificate and key (empty for a client)
  std::string token;              // a client's bearer token
  std::string admin_token, read_token;  // what the coordinator accepts

  static TransportSecurity Insecure() { return {}; }
};

// A member's: DIR/ca.pem, member.pem, member-key.pem, and the tokens when
// present (the coordinator needs them). Errors name the file and the flag.
absl::StatusOr<TransportSecurity> LoadMemberSecurity(const std::string& dir, const std::string& flag);

// The mains' --tls-dir and --insecure (exactly one): the member's security
// from the directory (with its tokens when `needs_tokens`, the
// coordinator's), or plaintext. Errors say what to give.
absl::StatusOr<TransportSecurity> SecurityFromFlags(const std::string& tls_dir, bool insecure, bool needs_tokens);

// Reads a file whole (a CA or a token; a token's trailing newline dropped).
// Errors start "WHAT 'PATH': ": NotFound when it is missing, InvalidArgument
// when it is not what it should be, PermissionDenied (naming its owner, mode
// and this process's ids) when it is there but this user may not read it.
// A file named *.pem must hold PEM.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& what);
// A CA to check peers against, whatever its file is called: PEM.
absl::StatusOr<std::string> ReadCaFile(const std::string& path, const std::string& what);

// What every server and channel of this process uses; the mains set it once
// at start, before any server or channel exists. Plaintext until set.
void SetProcessSecurity(const TransportSecurity& security);
const TransportSecurity& ProcessSecurity();

// A channel to `address` with this security: TLS checked against the CA for
// the name kClusterName (whatever address was dialled), a member's
// certificate presented, a client's token sent on every call.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, grpc::ChannelArguments args,
                                           const TransportSecurity& security = ProcessSecurity());

// Who a server takes: only members (a worker), or members and clients with a
// token (the coordinator).
enum class ServerPeers { kMembersOnly, kMembersAndClients };
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(ServerPeers peers,
                                                               const TransportSecurity& security = ProcessSecurity());

// Whether `token` is one of the pod's client tokens (admin or read): what the
// processes' HTTP ports (web view, /metrics) ask for when they use TLS. Null
// for plaintext, which checks nothing.
std::function<bool(const std::string& token)> ReadTokenCheck(const TransportSecurity& security = ProcessSecurity());

// What a call's peer may do on the coordinator, from its credentials
// (MakeServerCredentials attaches it): a member, an admin client, a read-only
// client; kAny on a plaintext server, which checks nothing; kNone for a
// call that got past TLS without a role (none does: the processor refuses it).
enum class PeerRole { kAny, kNone, kMember, kAdmin, kRead };
PeerRole RoleOf(const grpc::ServerContext& context);

// OK when the call's peer may make a call of `needs` (kMember: a member's
// certificate; kAdmin: the admin token; kRead: either token); else
// UNAUTHENTICATED or PERMISSION_DENIED naming what it lacks and `what` it asked.
grpc::Status Authorize(const grpc::ServerContext& context, PeerRole needs, const char* what);

}  // namespace tpuemu
