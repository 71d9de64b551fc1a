// Faults a job asks for on purpose (issue 17): links that carry less, or
// later, or nothing, and chips that compute slower, each for a window of
// steps (from a step on, or until one). Both clocks
// obey them: the emulated clock books the degraded link and charges the
// slower compute exactly, and a paced pod's links and chips really slow down
// by as much (core/wire/link_sender.cc, core/train/step_clock.cc).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/pod/topology.h"

namespace tpuemu {

// The steps a fault is in force: from `from_step` on, up to (not including)
// `until_step` when that is set.
struct StepWindow {
  int from_step = 0;
  int until_step = -1;  // -1: to the end of the job

  bool Covers(int step) const { return step >= from_step && (until_step < 0 || step < until_step); }
  bool operator==(const StepWindow&) const = default;
  std::string Describe() const;  // "", ", from step 3", ", steps 3 to 4"
};

// The links along `axis` (both directions, or only `dir`), or one directed
// link src->dst along it, at `bandwidth` of their rate and `extra_latency_s`
// more per hop.
struct SlowLink {
  Axis axis = Axis::kX;
  int dir = 0;       // +1 / -1: that direction only; 0: both
  int src = -1;      // >= 0: only the link from chip src to chip dst
  int dst = -1;
  double bandwidth = 1;  // fraction of the link's bandwidth, (0, 1]
  double extra_latency_s = 0;
  StepWindow when;
  // Why, when it is not a fault a user asked for (core/pod/dcn_fabric.h).
  std::string cause;

  bool Covers(int link_src, int link_dst, Axis link_axis, int link_dir) const;
  bool operator==(const SlowLink&) const = default;
  // "links x+ at 1/2 bandwidth, +1 us per hop, from step 3", "link 0->1 x+ ..."
  std::string Describe() const;
};

// A chip whose compute runs `factor` times slower.
struct Straggler {
  int chip = 0;
  double factor = 1;
  StepWindow when;

  std::string Describe() const;  // "chip 3 computes 2x slower, from step 5"
  bool operator==(const Straggler&) const = default;
};

// A directed link src->dst along `axis` (direction `dir`) that carries
// nothing. A collective whose schedule needs it fails naming it; with
// Faults::route_around, an axis whose ring wraps runs its one-way ring in the
// other direction instead (every line of the axis, so the collective's time is
// the one-way ring's).
struct DownLink {
  Axis axis = Axis::kX;
  int dir = +1;
  int src = 0;
  int dst = 0;
  StepWindow when;

  std::string Describe() const;  // "link 0->1 x+ down, from step 3"
  bool operator==(const DownLink&) const = default;
};

// A worker process killed (SIGKILL) or frozen (SIGSTOP, then SIGCONT after
// `pause_s`) as it starts step `at_step` of a training job's first attempt:
// the process holding the job's host `host` (the job's own host numbering).
struct WorkerFault {
  bool kill = true;
  int host = 0;
  int at_step = 0;
  double pause_s = 0;

  std::string Describe() const;  // "worker of host 1 killed at step 3"
  bool operator==(const WorkerFault&) const = default;
};

// What a worker process does for a WorkerFault (worker/self_faults.h);
// empty where there is no worker process to kill (the in-process pod).
using WorkerFaultAction = std::function<void(const WorkerFault&)>;

struct Faults {
  std::vector<SlowLink> slow_links;
  std::vector<Straggler> stragglers;
  std::vector<DownLink> down_links;
  std::vector<WorkerFault> workers;
  bool route_around = false;  // a down link on a ring: go the other way round instead of failing

  bool empty() const {
    return slow_links.empty() && stragglers.empty() && down_links.empty() && workers.empty();
  }
  bool operator==(const Faults&) const = default;
  // These and `more`'s (route_around if either asks).
  Faults With(const Faults& more) const;
  // A link's parameters at `step`, every slow link that covers it applied.
  LinkParams Link(LinkParams base, int src, int dst, Axis axis, int dir, int step) const;
  // How many times slower `chip` computes at `step` (1: not a straggler).
  double ComputeFactor(int chip, int step) const;
  // The down links in force at `step` (indices into down_links).
  std::vector<int> DownAt(int step) const;
  // The down link src->dst along axis/dir in force at `step`, or null.
  const DownLink* Down(int src, int dst, Axis axis, int dir, int step) const;
  // What is in force at `step`, in words, for the step's report.
  std::vector<std::string> ActiveAt(int step) const;
  // Every slow link, straggler and down link, in words, with its steps, and
  // route_around's meaning when set.
  std::vector<std::string> Described() const;
};

// The most faults a job may have, from its file, flags and `tpuemu fault`
// together: far more than a study of faults needs; each is checked at every
// step.
inline constexpr size_t kMaxFaults = 64;

// OK when every fault's values are in range, whatever the pod, alone and
// together with those in force at the same time on the same link or chip
// (they multiply), and there are at most kMaxFaults; errors name `field`,
// the entries and the value.
absl::Status CheckFaultValues(const Faults& faults, const std::string& field);

// OK when every fault names what `topo` has (an axis it has, a directed link
// between neighbours, a chip) with values in range; else an error naming
// `field` ("faults" in job files), the entry, the value and what is allowed.
absl::Status CheckFaults(const Faults& faults, const Topology& topo, const std::string& field);

// OK when every fault begins within a job of `steps` steps (0 to steps - 1;
// a collective is one step): one that would begin later never happens, and
// is refused rather than silently ignored.
absl::Status CheckFaultsBegin(const Faults& faults, int steps, const std::string& field);

// The command line's forms: "x@0.5", "x+@0.5+2us", "0->1 x+@0.25" (a slow
// link: which, @ its bandwidth fraction, + extra latency per hop), "3@2" (a
// straggler: chip @ its slowdown) and "0->1 x+" (a down link), each
// optionally followed by "from 5" (from step 5 on) and/or "until 8" (up to
// step 8, not including it). Errors name `flag`.
absl::Status ParseSlowLink(const std::string& text, const std::string& flag, SlowLink* out);
absl::Status ParseStraggler(const std::string& text, const std::string& flag, Straggler* out);
absl::Status ParseDownLink(const std::string& text, const std::string& flag, DownLink* out);
// The command line's repeatable --slow-link, --straggler and --down-link values.
absl::StatusOr<Faults> ParseFaultFlags(const std::vector<std::string>& slow_links,
                                       const std::vector<std::string>& stragglers,
                                       const std::vector<std::string>& down_links);
// "fail" (false) or "route" (true): what a collective does about a down link.
absl::Status ParseOnDownLink(const std::string& text, const std::string& field, bool* route_around);
// "1 at 3" (kill_worker) and "1 at 3 for 5s" (pause_worker): the job's host,
// the step, and how long it stays frozen.
absl::Status ParseWorkerFault(const std::string& text, bool kill, const std::string& flag, WorkerFault* out);

}  // namespace tpuemu
