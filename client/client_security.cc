#include "client/client_security.h"

#include <cstdlib>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/pod_state.h"

namespace tpuemu {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

std::map<std::string, std::string>& FlagsGiven() {
  static std::map<std::string, std::string> flags;  // variable -> the flag that set it
  return flags;
}

// What to call the setting `variable` in an error: the flag, when one set it.
std::string SettingName(const std::string& variable) {
  auto it = FlagsGiven().find(variable);
  return it != FlagsGiven().end() ? it->second : variable;
}

bool EnvSaysYes(const char* name) {
  const std::string v = Env(name);
  return v == "1" || v == "true" || v == "yes";
}

// The address with "localhost" spelled as the local pod records it.
std::string AsLoopback(const std::string& address) {
  constexpr absl::string_view kLocalhost = "localhost:";
  return absl::StartsWith(address, kLocalhost) ? absl::StrCat("127.0.0.1:", address.substr(kLocalhost.size()))
                                               : address;
}

// The local pod's credentials directory when `address` is its coordinator
// (localhost:PORT too: the same listener on 127.0.0.1); "" for a plaintext
// local pod; NotFound when `address` is not the local pod.
absl::StatusOr<std::string> LocalPodTlsDir(const std::string& address) {
  auto state = LoadPodState();
  if (!state.ok() || state->coordinator != AsLoopback(address)) return absl::NotFoundError("not the local pod");
  return state->tls_dir;
}

}  // namespace

void NoteSecurityFlag(const std::string& variable, const std::string& flag) { FlagsGiven()[variable] = flag; }

absl::StatusOr<TransportSecurity> ClientSecurityFor(const std::string& address) {
  if (EnvSaysYes("TPUEMU_INSECURE")) return TransportSecurity::Insecure();
  TransportSecurity security;
  security.tls = true;
  auto local = LocalPodTlsDir(address);
  if (local.ok() && local->empty()) return TransportSecurity::Insecure();  // started with --insecure
  if (!Env("TPUEMU_TLS_CA").empty()) {
    auto ca = ReadCaFile(Env("TPUEMU_TLS_CA"), SettingName("TPUEMU_TLS_CA"));
    if (!ca.ok()) return ca.status();
    security.ca_pem = *ca;
  } else if (local.ok()) {
    auto ca = ReadCaFile(*local + "/ca.pem", "the local pod's CA");
    if (!ca.ok()) return ca.status();
    security.ca_pem = *ca;
  } else {
    return absl::FailedPreconditionError(absl::StrCat(
        "the coordinator at ", address, ": no CA to check it against; set TPUEMU_TLS_CA to the pod's ca.pem (made "
        "by `tpuemu credentials create DIR`), or TPUEMU_INSECURE=1 for a pod started with --insecure"));
  }
  if (!Env("TPUEMU_TOKEN").empty()) {
    security.token = std::string(absl::StripAsciiWhitespace(Env("TPUEMU_TOKEN")));
  } else if (!Env("TPUEMU_TOKEN_FILE").empty()) {
    auto token = ReadSecretFile(Env("TPUEMU_TOKEN_FILE"), SettingName("TPUEMU_TOKEN_FILE"));
    if (!token.ok()) return token.status();
    security.token = *token;
  } else if (local.ok()) {
    auto token = ReadSecretFile(*local + "/admin.token", "the local pod's admin token");
    if (!token.ok()) return token.status();
    security.token = *token;
  }
  return security;
}

absl::StatusOr<TransportSecurity> ProbeSecurityFor(const std::string& address) {
  if (EnvSaysYes("TPUEMU_INSECURE")) return TransportSecurity::Insecure();
  if (!Env("TPUEMU_TLS_DIR").empty()) return LoadMemberSecurity(Env("TPUEMU_TLS_DIR"), "TPUEMU_TLS_DIR");
  if (!Env("TPUEMU_TLS_CA").empty()) return ClientSecurityFor(address);  // told which pod: a client of it
  if (auto state = LoadPodState(); state.ok()) {
    if (state->tls_dir.empty()) return TransportSecurity::Insecure();
    return LoadMemberSecurity(state->tls_dir, "the local pod's credentials");
  }
  return ClientSecurityFor(address);
}

}  // namespace tpuemu
