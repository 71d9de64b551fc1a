#include "services/transport_security.h"

#include <openssl/crypto.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "core/base/bounded_file.h"
#include "services/credentials.h"

namespace tpuemu {
namespace {

constexpr char kRoleProperty[] = "tpuemu_role";

// Set once by a main before any server or channel exists (a test sets it
// with no pod running), read after: no lock.
TransportSecurity& Process() {
  static TransportSecurity* security = new TransportSecurity();
  return *security;
}

bool SameSecret(const std::string& given, const std::string& wanted) {
  return !wanted.empty() && given.size() == wanted.size() &&
         CRYPTO_memcmp(given.data(), wanted.data(), given.size()) == 0;
}

// Runs on every call the coordinator's TLS port takes, health and
// reflection included: a member (its certificate verified in the
// handshake) or a client with a token goes on, with its role attached to
// the call; anyone else is refused before any handler runs.
class TokenProcessor : public grpc::AuthMetadataProcessor {
 public:
  TokenProcessor(std::string admin, std::string read) : admin_(std::move(admin)), read_(std::move(read)) {}

  bool IsBlocking() const override { return false; }

  grpc::Status Process(const InputMetadata& metadata, grpc::AuthContext* context, OutputMetadata* consumed,
                       OutputMetadata* /*response*/) override {
    if (context->IsPeerAuthenticated()) {
      context->AddProperty(kRoleProperty, "member");
      return grpc::Status::OK;
    }
    auto it = metadata.find("authorization");
    if (it == metadata.end()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "no credentials: present the pod's token (TPUEMU_TOKEN, or TPUEMU_TOKEN_FILE naming "
                          "admin.token or read.token from `tpuemu credentials create`)");
    }
    const std::string value(it->second.data(), it->second.size());
    absl::string_view token = value;
    if (!absl::ConsumePrefix(&token, "Bearer ")) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "the authorization header is not 'Bearer TOKEN'");
    }
    const char* role = SameSecret(std::string(token), admin_) ? "admin"
                       : SameSecret(std::string(token), read_) ? "read"
                                                                : nullptr;
    if (role == nullptr) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                          "the token was not accepted: it is not this pod's admin or read token");
    }
    consumed->insert({std::string(it->first.data(), it->first.size()), value});
    context->AddProperty(kRoleProperty, role);
    return grpc::Status::OK;
  }

 private:
  const std::string admin_, read_;
};

// `pem`: the file must hold PEM (a certificate, a key, a CA).
absl::StatusOr<std::string> ReadCredentialsFile(const std::string& path, const std::string& what, bool pem) {
  if (std::FILE* f = std::fopen(path.c_str(), "r"); f != nullptr) {
    std::fclose(f);
  } else if (errno == EACCES) {
    // It is there: making credentials again would not help. Say whose it is.
    struct stat st;
    const std::string owner = ::stat(path.c_str(), &st) == 0
                                  ? absl::StrFormat(" (owner uid %d, group %d, mode %04o)", st.st_uid, st.st_gid,
                                                    st.st_mode & 07777)
                                  : "";
    return absl::PermissionDeniedError(absl::StrCat(
        what, " '", path, "': permission denied", owner, " to uid ", ::geteuid(), " group ", ::getegid(),
        ": run as a user who may read it, or give this one read access (`tpuemu credentials create DIR --uid U` "
        "makes the files U's alone; on Kubernetes a pod reads its Secret through its fsGroup)"));
  } else {
    const int err = errno;
    return absl::Status(err == ENOENT ? absl::StatusCode::kNotFound : absl::StatusCode::kInvalidArgument,
                        absl::StrCat(what, " '", path, "': cannot read it: ", std::strerror(err),
                                            " (made by `tpuemu credentials create DIR`, or by `tpuemu cluster up` "
                                            "for a local pod)"));
  }
  // Certificates and tokens are a few KiB; a CA bundle a few hundred.
  auto text = ReadFileAtMost(path, 1 << 20, what);
  if (!text.ok()) return text.status();
  std::string out = *std::move(text);
  if (pem) {
    if (!absl::StrContains(out, "-----BEGIN ")) {
      return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "': not PEM (no -----BEGIN line); the pod's "
                                                     "certificates and keys are made by `tpuemu credentials create DIR`"));
    }
  }
  // A token is one line, whatever its file is called (a mounted Secret, a
  // copy): the newline an editor or `echo` adds is not part of it.
  if (!pem) out = std::string(absl::StripAsciiWhitespace(out));
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "': empty"));
  return out;
}

}  // namespace

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, const std::string& what) {
  return ReadCredentialsFile(path, what, absl::EndsWith(path, ".pem"));
}

absl::StatusOr<std::string> ReadCaFile(const std::string& path, const std::string& what) {
  return ReadCredentialsFile(path, what, /*pem=*/true);
}

absl::StatusOr<TransportSecurity> LoadMemberSecurity(const std::string& dir, const std::string& flag) {
  TransportSecurity s;
  s.tls = true;
  for (const auto& [file, into] : {std::pair{"ca.pem", &s.ca_pem}, std::pair{"member.pem", &s.cert_pem},
                                   std::pair{"member-key.pem", &s.key_pem}}) {
    auto text = ReadSecretFile(absl::StrCat(dir, "/", file), flag);
    if (!text.ok()) return text.status();
    *into = *std::move(text);
  }
  // Tokens: the coordinator's to check; a worker's directory may leave them out.
  for (const auto& [file, into] : {std::pair{"admin.token", &s.admin_token}, std::pair{"read.token", &s.read_token}}) {
    auto text = ReadSecretFile(absl::StrCat(dir, "/", file), flag);
    if (text.ok()) {
      *into = *std::move(text);
    } else if (!absl::IsNotFound(text.status())) {
      return text.status();  // there, but unreadable or not a token: said, not taken for absent
    }
  }
  return s;
}

absl::StatusOr<TransportSecurity> SecurityFromFlags(const std::string& tls_dir, bool insecure, bool needs_tokens) {
  if (insecure && !tls_dir.empty()) {
    return absl::InvalidArgumentError("--tls-dir and --insecure (or TPUEMU_TLS_DIR and TPUEMU_INSECURE): give one");
  }
  if (insecure) return TransportSecurity::Insecure();
  if (tls_dir.empty()) {
    return absl::InvalidArgumentError(
        "no credentials: give --tls-dir DIR (TPUEMU_TLS_DIR), a pod's credentials made by `tpuemu credentials "
        "create DIR`, or --insecure (TPUEMU_INSECURE=1) to serve in plaintext to anyone who reaches the port");
  }
  auto security = LoadMemberSecurity(tls_dir, "--tls-dir");
  if (!security.ok()) return security.status();
  if (needs_tokens && (security->admin_token.empty() || security->read_token.empty())) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-dir '", tls_dir, "': the coordinator needs admin.token and "
                                                   "read.token there too (what clients present)"));
  }
  return security;
}

void SetProcessSecurity(const TransportSecurity& security) { Process() = security; }

const TransportSecurity& ProcessSecurity() { return Process(); }

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, grpc::ChannelArguments args,
                                           const TransportSecurity& security) {
  if (!security.tls) return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = security.ca_pem;
  options.pem_private_key = security.key_pem;
  options.pem_cert_chain = security.cert_pem;
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::SslCredentials(options);
  if (!security.token.empty()) {
    credentials = grpc::CompositeChannelCredentials(credentials, grpc::AccessTokenCredentials(security.token));
  }
  args.SetSslTargetNameOverride(kClusterName);
  return grpc::CreateCustomChannel(address, credentials, args);
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(ServerPeers peers, const TransportSecurity& security) {
  if (!security.tls) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(peers == ServerPeers::kMembersOnly
                                                ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                                : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = security.ca_pem;
  options.pem_key_cert_pairs.push_back({security.key_pem, security.cert_pem});
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::SslServerCredentials(options);
  if (peers == ServerPeers::kMembersAndClients) {
    credentials->SetAuthMetadataProcessor(
        std::make_shared<TokenProcessor>(security.admin_token, security.read_token));
  }
  return credentials;
}

std::function<bool(const std::string& token)> ReadTokenCheck(const TransportSecurity& security) {
  if (!security.tls) return nullptr;
  return [admin = security.admin_token, read = security.read_token](const std::string& token) {
    return SameSecret(token, admin) || SameSecret(token, read);
  };
}

PeerRole RoleOf(const grpc::ServerContext& context) {
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr) return PeerRole::kAny;
  const auto type = auth->FindPropertyValues(GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME);
  if (type.empty() || type[0] != "ssl") return PeerRole::kAny;  // a plaintext server checks nothing
  const auto role = auth->FindPropertyValues(kRoleProperty);
  if (role.empty()) return PeerRole::kNone;
  if (role[0] == "member") return PeerRole::kMember;
  return role[0] == "admin" ? PeerRole::kAdmin : PeerRole::kRead;
}

grpc::Status Authorize(const grpc::ServerContext& context, PeerRole needs, const char* what) {
  const PeerRole role = RoleOf(context);
  if (role == PeerRole::kAny || role == needs) return grpc::Status::OK;
  if (needs == PeerRole::kRead && role == PeerRole::kAdmin) return grpc::Status::OK;
  if (role == PeerRole::kNone) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no credentials");
  if (needs == PeerRole::kMember) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat(what, " is for the pod's workers (the pod's member certificate), not clients"));
  }
  if (role == PeerRole::kRead) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat("a read-only token cannot ", what, ": use the admin token"));
  }
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      absl::StrCat("a member certificate cannot ", what, ": a client presents a token"));
}

}  // namespace tpuemu
