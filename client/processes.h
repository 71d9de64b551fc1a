// Starting and stopping the pod's background processes, and recognising
// them later: a PID alone may by then belong to an unrelated process, as
// PIDs are reused once ours exit.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tpuemu {

// A process this CLI started, as recorded in the pod file.
struct StartedProcess {
  int pid = 0;
  // Its identity: the kernel's boot and the process's start time (clock
  // ticks since boot, /proc/PID/stat field 22), both fixed for its life. A
  // reused PID has another start time; after a reboot, another boot id.
  std::string boot_id;
  uint64_t start_ticks = 0;
  std::vector<std::string> argv;  // what it was started with, to start it again
  std::string log;                // where its output is appended
};

// Path of a sibling binary (next to this executable, else on PATH).
std::string FindBinary(const std::string& name);
// Starts argv in its own session with stdout/stderr appended to log_path.
absl::StatusOr<StartedProcess> SpawnDetached(const std::vector<std::string>& argv, const std::string& log_path);
// The process is alive (not a zombie) and is the one recorded, not a later
// process that got its PID.
bool IsRunning(const StartedProcess& p);
// SIGTERM (and SIGCONT, for a stopped one) to those of `processes` that are
// still the recorded ones, without waiting; returns them.
std::vector<StartedProcess> SignalTerm(const std::vector<StartedProcess>& processes);
// SIGTERM, then SIGKILL after grace_s, to those of `processes` that are
// still the recorded ones (others are left alone); returns how many needed
// SIGKILL.
int StopProcesses(const std::vector<StartedProcess>& processes, double grace_s);
// The running processes of this user whose command line `match` accepts
// (e.g. workers someone started by hand for a pod), with their identities.
std::vector<StartedProcess> FindProcesses(const std::function<bool(const std::vector<std::string>& argv)>& match);
// The last `lines` lines a process SpawnDetached started last wrote to its
// log (which keeps every earlier start's too).
std::string TailOfLastStart(const std::string& path, int lines);

}  // namespace tpuemu
