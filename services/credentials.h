// A pod's credentials (issue 17), made once and handed to its members and
// users: a certificate authority of its own, one certificate it signed for
// the pod's members (coordinator and workers use it both ways: mutual TLS),
// and two bearer tokens for clients (admin: everything; read: look only).
//
// The files, in one directory:
//   ca.pem                the CA's certificate: what members and clients check peers against
//   ca-key.pem            the CA's key (only to sign more; no process reads it)
//   member.pem            the members' certificate, for the name kClusterName
//   member-key.pem        its key
//   admin.token           a client's token for every coordinator call
//   read.token            a client's token for the calls that change nothing
#pragma once

#include <string>

#include "absl/status/status.h"

namespace tpuemu {

// The name in the members' certificate, which every channel checks instead
// of the address it dialled: a member's certificate is valid at whatever
// address the pod's members and clients reach it.
inline constexpr char kClusterName[] = "tpuemu-cluster";

// Writes a fresh set into `dir` (made 0700 if missing), keys and tokens
// 0600; refuses a directory that already holds any of the files. `uid` >= 0
// chowns the files to that user (a container's, which reads them from a
// bind mount).
absl::Status CreateCredentials(const std::string& dir, int uid = -1);

// OK when `dir` holds a complete set (what a member or a local client reads).
absl::Status CheckCredentials(const std::string& dir);

}  // namespace tpuemu
