// How the CLI reaches a pod (issue 17; docs/security.md): TLS checked
// against the pod's CA, with a bearer token, unless asked for plaintext.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "services/transport_security.h"

namespace tpuemu {

// A client's security for the coordinator at `address`:
// - TPUEMU_INSECURE=1: plaintext (a pod started with --insecure);
// - the pod `tpuemu cluster up` started here, at that address: what it was
//   started with (its CA and admin token in $TPUEMU_HOME/tls, or plaintext);
// - else TLS checked against TPUEMU_TLS_CA (the pod's ca.pem).
// The token: TPUEMU_TOKEN, else the file TPUEMU_TOKEN_FILE, else the local
// pod's admin token; none at all, and the coordinator says so.
absl::StatusOr<TransportSecurity> ClientSecurityFor(const std::string& address);

// The CLI's --tls-ca and --token-file set TPUEMU_TLS_CA and
// TPUEMU_TOKEN_FILE for the command that follows; noted here, an error about
// the file names the flag the user typed rather than the variable.
void NoteSecurityFlag(const std::string& variable, const std::string& flag);

// A member's security for `tpuemu health` (probes run beside the process
// they probe): TPUEMU_TLS_DIR's; else, unless TPUEMU_TLS_CA names a pod, the
// local pod's member certificate (workers take members only); else the client's.
absl::StatusOr<TransportSecurity> ProbeSecurityFor(const std::string& address);

}  // namespace tpuemu
