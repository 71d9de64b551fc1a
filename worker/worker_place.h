// Where a worker sits in the pod (slice, host within the slice), found the
// way multi-host TPU jobs find it, from the first source that says:
//   1. explicit flags (--slice, --host);
//   2. TPU_WORKER_ID, with MEGASCALE_SLICE_ID for the slice;
//   3. this machine's hostname's position in TPU_WORKER_HOSTNAMES;
//   4. a StatefulSet ordinal: TPUEMU_POD_INDEX (the manifests fill it from the
//      apps.kubernetes.io/pod-index label through the downward API), else, in
//      Kubernetes only, the hostname's -N suffix;
//   5. nothing: the coordinator assigns the next free place (compose --scale).
// MEGASCALE_NUM_SLICES, when set, is checked against the pod's slices.
// The coordinator address and the name peers use to reach the worker are
// resolved here too, from flags and the same environment.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace tpuemu {

// What the process was started with; `env` returns nullopt for an unset
// (or empty) variable.
struct PlaceInputs {
  std::optional<int> flag_slice, flag_host;
  std::function<std::optional<std::string>(const std::string&)> env;
  std::string hostname;
};

struct WorkerPlace {
  int slice = -1;      // -1: the coordinator picks
  int host = -1;       // -1: the coordinator picks
  int num_slices = 0;  // MEGASCALE_NUM_SLICES; 0 when not set
  std::string source;  // what said so, e.g. "TPU_WORKER_ID=3", for logs and errors
  std::string machine;  // the machine it runs on (machine_share.h: ThisMachine); "": not said
};

absl::StatusOr<WorkerPlace> ResolveWorkerPlace(const PlaceInputs& in);

// The coordinator: --coordinator (or TPUEMU_COORDINATOR), else
// MEGASCALE_COORDINATOR_ADDRESS (HOST or HOST:PORT; the port defaults to
// kDefaultCoordinatorPort).
inline constexpr int kDefaultCoordinatorPort = 50051;
absl::StatusOr<std::string> ResolveCoordinatorAddress(const std::string& flag, const PlaceInputs& in);

// The host name peers dial: --advertise (or TPUEMU_ADVERTISE); else, when the
// worker listens on every interface (0.0.0.0, [::]), the canonical name of its
// hostname (a pod's DNS name in Kubernetes, the container's name under
// compose); else the --listen host (127.0.0.1 for a local pod).
std::string AdvertiseHost(const std::string& flag, const std::string& listen,
                          const std::function<std::string()>& canonical_hostname);

// The fully qualified name of this machine (getaddrinfo's canonical name),
// or its plain hostname when that does not resolve.
std::string CanonicalHostname();
std::string Hostname();

}  // namespace tpuemu
