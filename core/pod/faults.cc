#include "core/pod/faults.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/base/units.h"

namespace tpuemu {
namespace {

std::string Fraction(double f) {
  const double inverse = 1 / f;
  if (std::abs(inverse - std::round(inverse)) < 1e-9) return absl::StrCat("1/", std::lround(inverse));
  return absl::StrFormat("%.3g", f);
}

std::string FromStep(int step) { return step > 0 ? absl::StrCat(", from step ", step) : ""; }

std::string LinkName(int src, int dst, Axis axis, int dir) {
  return absl::StrCat(src, "->", dst, " ", AxisName(axis), dir > 0 ? "+" : "-");
}

absl::Status Bad(const std::string& field, const std::string& value, const std::string& allowed) {
  return absl::InvalidArgumentError(absl::StrCat(field, " '", value, "': ", allowed));
}

// "TEXT from N" -> TEXT and N.
absl::Status TakeFromStep(std::string& text, const std::string& flag, int* from_step) {
  const size_t from = text.find(" from ");
  if (from == std::string::npos) return absl::OkStatus();
  const std::string step = text.substr(from + 6);
  if (!absl::SimpleAtoi(step, from_step) || *from_step < 0) {
    return Bad(flag, text, absl::StrCat("'from ", step, "' must name a step, 0 or more"));
  }
  text.resize(from);
  return absl::OkStatus();
}

// The ranges a slow link's or a straggler's values must be in, whatever the pod.
absl::Status CheckValues(const SlowLink& s, const std::string& at) {
  if (!(s.bandwidth > 0 && s.bandwidth <= 1)) {
    return Bad(at + " bandwidth", absl::StrCat(s.bandwidth), "a fraction of the link's rate, above 0 and at most 1");
  }
  if (!(s.extra_latency_s >= 0 && s.extra_latency_s <= 1)) {
    return Bad(at + " extra latency", absl::StrCat(s.extra_latency_s), "seconds, from 0 to 1");
  }
  if (s.bandwidth == 1 && s.extra_latency_s == 0) {
    return Bad(at, s.Describe(), "slows nothing: give a bandwidth below 1 or an extra latency");
  }
  if (s.from_step < 0) return Bad(at + " from_step", absl::StrCat(s.from_step), "a step, 0 or more");
  return absl::OkStatus();
}

absl::Status CheckValues(const WorkerFault& w, const std::string& at) {
  if (w.host < 0) return Bad(at + " host", absl::StrCat(w.host), "a host of the job, 0 or more");
  if (w.at_step < 0) return Bad(at + " step", absl::StrCat(w.at_step), "a step, 0 or more");
  if (!w.kill && !(w.pause_s > 0 && w.pause_s <= 600)) {
    return Bad(at + " for", absl::StrCat(w.pause_s, "s"), "how long it stays frozen: above 0 and at most 600 s");
  }
  return absl::OkStatus();
}

absl::Status CheckValues(const Straggler& s, const std::string& at) {
  if (!(s.factor > 1 && s.factor <= 1000)) {
    return Bad(at + " factor", absl::StrCat(s.factor), "how many times slower it computes, above 1 and at most 1000");
  }
  if (s.from_step < 0) return Bad(at + " from_step", absl::StrCat(s.from_step), "a step, 0 or more");
  return absl::OkStatus();
}

}  // namespace

bool SlowLink::Covers(int link_src, int link_dst, Axis link_axis, int link_dir) const {
  if (link_axis != axis) return false;
  if (src >= 0) return link_src == src && link_dst == dst && link_dir == dir;
  return dir == 0 || dir == link_dir;
}

std::string SlowLink::Describe() const {
  std::string which = src >= 0 ? absl::StrCat("link ", LinkName(src, dst, axis, dir))
                               : absl::StrCat("links ", AxisName(axis), dir > 0 ? "+" : dir < 0 ? "-" : "");
  std::string how;
  if (bandwidth < 1) how = absl::StrCat(" at ", Fraction(bandwidth), " bandwidth");
  if (extra_latency_s > 0) absl::StrAppend(&how, how.empty() ? " " : ", ", "+", FormatSeconds(extra_latency_s), " per hop");
  return absl::StrCat(which, how, FromStep(from_step));
}

std::string WorkerFault::Describe() const {
  return kill ? absl::StrCat("worker of host ", host, " killed at step ", at_step)
              : absl::StrCat("worker of host ", host, " frozen for ", FormatSeconds(pause_s), " at step ", at_step);
}

std::string Straggler::Describe() const {
  return absl::StrCat("chip ", chip, " computes ", absl::StrFormat("%g", factor), "x slower", FromStep(from_step));
}

LinkParams Faults::Link(LinkParams base, int src, int dst, Axis axis, int dir, int step) const {
  for (const SlowLink& s : slow_links) {
    if (step < s.from_step || !s.Covers(src, dst, axis, dir)) continue;
    base.bw_dir *= s.bandwidth;
    base.latency += s.extra_latency_s;
  }
  return base;
}

double Faults::ComputeFactor(int chip, int step) const {
  double factor = 1;
  for (const Straggler& s : stragglers) {
    if (s.chip == chip && step >= s.from_step) factor *= s.factor;
  }
  return factor;
}

std::vector<std::string> Faults::ActiveAt(int step) const {
  std::vector<std::string> active;
  for (const SlowLink& s : slow_links) {
    if (step >= s.from_step) active.push_back(s.Describe());
  }
  for (const Straggler& s : stragglers) {
    if (step >= s.from_step) active.push_back(s.Describe());
  }
  return active;
}

absl::Status CheckFaultValues(const Faults& faults, const std::string& field) {
  for (size_t i = 0; i < faults.slow_links.size(); ++i) {
    if (auto bad = CheckValues(faults.slow_links[i], absl::StrCat(field, ": slow_link ", i + 1)); !bad.ok()) return bad;
  }
  for (size_t i = 0; i < faults.stragglers.size(); ++i) {
    if (auto bad = CheckValues(faults.stragglers[i], absl::StrCat(field, ": straggler ", i + 1)); !bad.ok()) return bad;
  }
  for (size_t i = 0; i < faults.workers.size(); ++i) {
    const std::string at = absl::StrCat(field, ": ", faults.workers[i].kill ? "kill_worker " : "pause_worker ", i + 1);
    if (auto bad = CheckValues(faults.workers[i], at); !bad.ok()) return bad;
  }
  return absl::OkStatus();
}

absl::Status CheckFaults(const Faults& faults, const Topology& topo, const std::string& field) {
  if (auto bad = CheckFaultValues(faults, field); !bad.ok()) return bad;
  for (size_t i = 0; i < faults.slow_links.size(); ++i) {
    const SlowLink& s = faults.slow_links[i];
    const std::string at = absl::StrCat(field, ": slow_link ", i + 1);
    if (!topo.HasAxis(s.axis)) {
      return Bad(at, AxisName(s.axis), absl::StrCat("this pod (", topo.Describe(), ") has no such axis"));
    }
    if (s.src >= 0) {
      const bool chips_ok = s.src < topo.num_chips() && s.dst >= 0 && s.dst < topo.num_chips();
      if (!chips_ok || topo.Neighbor(s.src, s.axis, s.dir) != s.dst) {
        return Bad(at + " link", LinkName(s.src, s.dst, s.axis, s.dir),
                   absl::StrCat("no such link: name one between neighbours, e.g. ",
                                topo.Neighbor(0, s.axis, +1) ? LinkName(0, *topo.Neighbor(0, s.axis, +1), s.axis, +1)
                                                             : "0->1 x+"));
      }
    }
  }
  for (size_t i = 0; i < faults.stragglers.size(); ++i) {
    const Straggler& s = faults.stragglers[i];
    const std::string at = absl::StrCat(field, ": straggler ", i + 1);
    if (s.chip < 0 || s.chip >= topo.num_chips()) {
      return Bad(at + " chip", absl::StrCat(s.chip), absl::StrCat("a chip of this pod, 0 to ", topo.num_chips() - 1));
    }
  }
  for (size_t i = 0; i < faults.workers.size(); ++i) {
    const WorkerFault& w = faults.workers[i];
    const std::string at = absl::StrCat(field, ": ", w.kill ? "kill_worker " : "pause_worker ", i + 1);
    if (w.host >= topo.num_hosts()) {
      return Bad(at + " host", absl::StrCat(w.host),
                 absl::StrCat("a host of the job, 0 to ", topo.num_hosts() - 1, " (", topo.chips_per_host(),
                              " chips each, numbered as `tpuemu cluster status` numbers a whole pod's)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseSlowLink(const std::string& input, const std::string& flag, SlowLink* out) {
  static const char* kForms = "give LINKS@FRACTION[+LATENCY][ from STEP]: x@0.5, x+@0.5+2us, '0->1 x+@0.25 from 3'";
  std::string text = input;
  if (auto s = TakeFromStep(text, flag, &out->from_step); !s.ok()) return s;
  std::vector<std::string> at = absl::StrSplit(text, '@');
  if (at.size() != 2) return Bad(flag, input, kForms);
  std::string which = at[0], how = at[1];
  // Which: "x", "x+", "x-", or "0->1 x+".
  const size_t space = which.find(' ');
  std::string axis_text = which;
  if (space != std::string::npos) {
    std::vector<std::string> ends = absl::StrSplit(which.substr(0, space), "->");
    axis_text = which.substr(space + 1);
    if (ends.size() != 2 || !absl::SimpleAtoi(ends[0], &out->src) || !absl::SimpleAtoi(ends[1], &out->dst)) {
      return Bad(flag, input, kForms);
    }
    if (axis_text.empty() || (axis_text.back() != '+' && axis_text.back() != '-')) {
      return Bad(flag, input, "a single link names its direction: '0->1 x+'");
    }
  }
  if (!axis_text.empty() && (axis_text.back() == '+' || axis_text.back() == '-')) {
    out->dir = axis_text.back() == '+' ? +1 : -1;
    axis_text.pop_back();
  }
  auto axis = ParseAxis(axis_text);
  if (!axis.ok()) return Bad(flag, input, absl::StrCat("'", axis_text, "' is not an axis: x, y, z or dcn"));
  out->axis = *axis;
  // How: "0.5" or "0.5+2us" or "1+2us".
  std::vector<std::string> plus = absl::StrSplit(how, absl::MaxSplits('+', 1));
  if (!absl::SimpleAtod(plus[0], &out->bandwidth)) return Bad(flag, input, kForms);
  if (plus.size() == 2) {
    auto latency = ParseDuration(plus[1], flag + " extra latency", absl::Seconds(1));
    if (!latency.ok()) return latency.status();
    out->extra_latency_s = absl::ToDoubleSeconds(*latency);
  }
  return CheckValues(*out, absl::StrCat(flag, " '", input, "'"));
}

absl::Status ParseWorkerFault(const std::string& input, bool kill, const std::string& flag, WorkerFault* out) {
  const char* form = kill ? "give HOST at STEP: 1 at 3 (the job's host 1, as it starts step 3)"
                          : "give HOST at STEP for TIME: 1 at 3 for 5s";
  out->kill = kill;
  std::vector<std::string> words = absl::StrSplit(input, ' ', absl::SkipEmpty());
  const size_t want = kill ? 3 : 5;
  if (words.size() != want || words[1] != "at" || (!kill && words[3] != "for") ||
      !absl::SimpleAtoi(words[0], &out->host) || !absl::SimpleAtoi(words[2], &out->at_step)) {
    return Bad(flag, input, form);
  }
  if (!kill) {
    auto pause = ParseDuration(words[4], flag + " for", absl::Seconds(600));
    if (!pause.ok()) return pause.status();
    out->pause_s = absl::ToDoubleSeconds(*pause);
  }
  return CheckValues(*out, absl::StrCat(flag, " '", input, "'"));
}

absl::Status ParseStraggler(const std::string& input, const std::string& flag, Straggler* out) {
  std::string text = input;
  if (auto s = TakeFromStep(text, flag, &out->from_step); !s.ok()) return s;
  std::vector<std::string> at = absl::StrSplit(text, '@');
  if (at.size() != 2 || !absl::SimpleAtoi(at[0], &out->chip) || !absl::SimpleAtod(at[1], &out->factor)) {
    return Bad(flag, input, "give CHIP@FACTOR[ from STEP]: 3@2 (chip 3 computes 2x slower), '3@2 from 5'");
  }
  if (out->chip < 0) return Bad(flag, input, "a chip's number, 0 or more");
  return CheckValues(*out, absl::StrCat(flag, " '", input, "'"));
}

}  // namespace tpuemu
