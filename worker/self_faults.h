// How a worker process carries out a training job's kill_worker and
// pause_worker (core/pod/faults.h, issue 17): for real, on itself, so that the
// coordinator meets exactly what an accidental crash or freeze shows it.
#pragma once

#include "core/pod/faults.h"

namespace tpuemu {

// kill: SIGKILL to this process. pause: this process stops itself (SIGSTOP)
// and a timer sends it SIGCONT after pause_s, so its heartbeats, RPCs and
// links all freeze, then go on.
void CarryOutOnThisProcess(const WorkerFault& fault);

}  // namespace tpuemu
