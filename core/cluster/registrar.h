// The coordinator as its workers see it: where a worker registers for a place
// in the pod, then heartbeats, and asks which of its checkpoints may go. A
// worker process reaches it through its gRPC client
// (services/registrar_client.h); the coordinator answers in
// coordinator/coordinator.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tpuemu {

// The longest heartbeat timeout a pod may have (`--heartbeat-timeout`):
// beyond it a stopped worker would hold the pod's jobs for good.
inline constexpr absl::Duration kMaxHeartbeatTimeout = absl::Hours(1);

// The place a worker asks for.
struct PlaceRequest {
  int slice = -1;  // -1: the coordinator assigns one
  int host = -1;   // within the slice; -1: the coordinator assigns one
  std::string address;
  int num_slices = 0;        // what the worker's environment says; 0: not said
  std::string place_source;  // where the worker found its place, for logs and errors
  std::string machine;       // the machine it runs on, so that workers there share its cores; "": not said
};

// The place a worker was given, and the registration that holds it.
struct GrantedPlace {
  int global_host = -1;
  int slice = -1;
  int host = -1;
  uint64_t incarnation = 0;
  // How long the coordinator waits for a heartbeat before it looks at the
  // worker's connection; zero when it does not say.
  absl::Duration heartbeat_timeout;
};

class Registrar {
 public:
  virtual ~Registrar() = default;
  // InvalidArgument, AlreadyExists and ResourceExhausted refuse the place
  // itself (asking again cannot help); other errors may pass.
  virtual absl::StatusOr<GrantedPlace> RegisterWorker(const PlaceRequest& request) = 0;
  // NotFound: the coordinator does not know the host (it restarted);
  // FailedPrecondition: another registration holds the place now.
  // `resident_bytes`: the worker process's resident memory now (0: unknown).
  virtual absl::Status Heartbeat(int global_host, uint64_t incarnation, uint64_t resident_bytes) = 0;
  // Of `jobs` (job numbers whose checkpoints the worker keeps), those no
  // job record can resume: their checkpoints may go.
  virtual absl::StatusOr<std::vector<uint64_t>> ForgottenJobs(const std::vector<uint64_t>& jobs) = 0;
};

}  // namespace tpuemu
