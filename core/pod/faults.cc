#include "core/pod/faults.h"

#include <algorithm>
#include <limits>

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
  if (inverse < 1e6 && std::abs(inverse - std::round(inverse)) < 1e-9) return absl::StrCat("1/", std::lround(inverse));
  return absl::StrFormat("%.3g", f);
}

std::string LinkName(int src, int dst, Axis axis, int dir) {
  return absl::StrCat(src, "->", dst, " ", AxisName(axis), dir > 0 ? "+" : "-");
}

absl::Status Bad(const std::string& field, const std::string& value, const std::string& allowed) {
  return absl::InvalidArgumentError(absl::StrCat(field, " '", value, "': ", allowed));
}

// "TEXT[ from N][ until M]" -> TEXT and the window.
absl::Status TakeWindow(std::string& text, const std::string& flag, StepWindow* when) {
  const std::string input = text;
  for (const auto& [word, step] : {std::pair{" until ", &when->until_step}, std::pair{" from ", &when->from_step}}) {
    const size_t at = text.find(word);
    if (at == std::string::npos) continue;
    const std::string value = text.substr(at + std::string(word).size());
    if (!absl::SimpleAtoi(value, step) || *step < 0) {
      return Bad(flag, input, absl::StrCat("'", absl::StripAsciiWhitespace(word), " ", value,
                                           "' must name a step, from 0 to ", std::numeric_limits<int>::max()));
    }
    text.resize(at);
  }
  return absl::OkStatus();
}

absl::Status CheckWindow(const StepWindow& w, const std::string& at) {
  if (w.from_step < 0) return Bad(at + " from", absl::StrCat(w.from_step), "a step, 0 or more");
  if (w.until_step >= 0 && w.until_step <= w.from_step) {
    return Bad(at + " until", absl::StrCat(w.until_step),
               absl::StrCat("a step after its first (", w.from_step, "): the fault is in force up to it, not on it"));
  }
  return absl::OkStatus();
}

// The ranges a slow link's or a straggler's values must be in, whatever the pod.
absl::Status CheckValues(const SlowLink& s, const std::string& at) {
  // At least 1/1000, as a straggler computes at most 1000 times slower: a
  // smaller fraction (1e-300) made emulated times overflow.
  if (!(s.bandwidth >= 1e-3 && s.bandwidth <= 1)) {
    return Bad(at + " bandwidth", absl::StrCat(s.bandwidth),
               "a fraction of the link's rate, from 0.001 (1/1000) to 1");
  }
  if (!(s.extra_latency_s >= 0 && s.extra_latency_s <= 1)) {
    return Bad(at + " extra latency", absl::StrCat(s.extra_latency_s), "seconds, from 0 to 1");
  }
  if (s.bandwidth == 1 && s.extra_latency_s == 0) {
    return Bad(at, s.Describe(), "slows nothing: give a bandwidth below 1 or an extra latency");
  }
  return CheckWindow(s.when, at);
}

absl::Status CheckValues(const DownLink& d, const std::string& at) {
  if (d.dir != 1 && d.dir != -1) return Bad(at + " direction", absl::StrCat(d.dir), "+ or -");
  return CheckWindow(d.when, at);
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
  return CheckWindow(s.when, at);
}

// "0->1 x+" -> the link's ends, axis and direction.
absl::Status ParseLinkName(const std::string& which, const std::string& flag, const std::string& input,
                           const std::string& forms, int* src, int* dst, Axis* axis, int* dir) {
  std::vector<std::string> words = absl::StrSplit(which, ' ', absl::SkipEmpty());
  if (words.size() != 2) return Bad(flag, input, forms);
  std::vector<std::string> ends = absl::StrSplit(words[0], "->");
  if (ends.size() != 2 || !absl::SimpleAtoi(ends[0], src) || !absl::SimpleAtoi(ends[1], dst)) {
    return Bad(flag, input, forms);
  }
  std::string axis_text = words[1];
  if (axis_text.empty() || (axis_text.back() != '+' && axis_text.back() != '-')) {
    return Bad(flag, input, "a single link names its direction: '0->1 x+'");
  }
  *dir = axis_text.back() == '+' ? +1 : -1;
  axis_text.pop_back();
  auto parsed = ParseAxis(axis_text);
  if (!parsed.ok()) return Bad(flag, input, absl::StrCat("'", axis_text, "' is not an axis: x, y, z or dcn"));
  *axis = *parsed;
  return absl::OkStatus();
}

// OK when src->dst is a link of `topo` along axis/dir.
absl::Status CheckLinkExists(const Topology& topo, int src, int dst, Axis axis, int dir, const std::string& at) {
  const bool chips_ok = src >= 0 && src < topo.num_chips() && dst >= 0 && dst < topo.num_chips();
  if (chips_ok && topo.Neighbor(src, axis, dir) == dst) return absl::OkStatus();
  auto example = topo.Neighbor(0, axis, +1);
  return Bad(at + " link", LinkName(src, dst, axis, dir),
             absl::StrCat("no such link: name one between neighbours, e.g. ",
                          example ? LinkName(0, *example, axis, +1) : "0->1 x+"));
}

}  // namespace

std::string StepWindow::Describe() const {
  if (until_step >= 0) {
    return until_step == from_step + 1 ? absl::StrCat(", at step ", from_step)
                                       : absl::StrCat(", steps ", from_step, " to ", until_step - 1);
  }
  return from_step > 0 ? absl::StrCat(", from step ", from_step) : "";
}

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
  // The fabric's share is told each step it holds; its window only grows.
  if (!cause.empty()) return absl::StrCat(which, how, ": ", cause);
  return absl::StrCat(which, how, when.Describe());
}

std::string DownLink::Describe() const { return absl::StrCat("link ", LinkName(src, dst, axis, dir), " down", when.Describe()); }

std::string WorkerFault::Describe() const {
  return kill ? absl::StrCat("worker of host ", host, " killed at step ", at_step)
              : absl::StrCat("worker of host ", host, " frozen for ", FormatSeconds(pause_s), " at step ", at_step);
}

std::string Straggler::Describe() const {
  return absl::StrCat("chip ", chip, " computes ", absl::StrFormat("%g", factor), "x slower", when.Describe());
}

Faults Faults::With(const Faults& more) const {
  Faults all = *this;
  all.slow_links.insert(all.slow_links.end(), more.slow_links.begin(), more.slow_links.end());
  all.stragglers.insert(all.stragglers.end(), more.stragglers.begin(), more.stragglers.end());
  all.down_links.insert(all.down_links.end(), more.down_links.begin(), more.down_links.end());
  all.workers.insert(all.workers.end(), more.workers.begin(), more.workers.end());
  all.route_around = route_around || more.route_around;
  return all;
}

LinkParams Faults::Link(LinkParams base, int src, int dst, Axis axis, int dir, int step) const {
  for (const SlowLink& s : slow_links) {
    if (!s.when.Covers(step) || !s.Covers(src, dst, axis, dir)) continue;
    base.bw_dir *= s.bandwidth;
    base.latency += s.extra_latency_s;
  }
  return base;
}

double Faults::ComputeFactor(int chip, int step) const {
  double factor = 1;
  for (const Straggler& s : stragglers) {
    if (s.chip == chip && s.when.Covers(step)) factor *= s.factor;
  }
  return factor;
}

std::vector<int> Faults::DownAt(int step) const {
  std::vector<int> down;
  for (size_t i = 0; i < down_links.size(); ++i) {
    if (down_links[i].when.Covers(step)) down.push_back(static_cast<int>(i));
  }
  return down;
}

const DownLink* Faults::Down(int src, int dst, Axis axis, int dir, int step) const {
  for (const DownLink& d : down_links) {
    if (d.when.Covers(step) && d.src == src && d.dst == dst && d.axis == axis && d.dir == dir) return &d;
  }
  return nullptr;
}

namespace {

template <class Fault>
void DescribeIf(const std::vector<Fault>& faults, const std::function<bool(const StepWindow&)>& wanted,
                std::vector<std::string>* out) {
  for (const Fault& f : faults) {
    if (wanted(f.when)) out->push_back(f.Describe());
  }
}

}  // namespace

std::vector<std::string> Faults::ActiveAt(int step) const {
  std::vector<std::string> active;
  auto covers = [step](const StepWindow& w) { return w.Covers(step); };
  DescribeIf(slow_links, covers, &active);
  DescribeIf(stragglers, covers, &active);
  DescribeIf(down_links, covers, &active);
  return active;
}

std::vector<std::string> Faults::Described() const {
  std::vector<std::string> all;
  auto any = [](const StepWindow&) { return true; };
  DescribeIf(slow_links, any, &all);
  DescribeIf(stragglers, any, &all);
  DescribeIf(down_links, any, &all);
  if (route_around) all.push_back("collectives that need a down link go the other way round their ring");
  return all;
}

namespace {

// "slow_links 1, 3 and 4"
std::string Entries(const char* kind, const std::vector<size_t>& which) {
  std::string out = absl::StrCat(kind, " ");
  for (size_t k = 0; k < which.size(); ++k) {
    absl::StrAppend(&out, k == 0 ? "" : k + 1 == which.size() ? " and " : ", ", which[k] + 1);
  }
  return out;
}

// Faults in force together multiply (bandwidths, compute factors) or add
// (latencies), and are held together to one fault's limits, which keep
// emulated times finite: ten slow links at 1/1000 made a collective's time
// overflow to a negative number. The worst case is at a step where one of
// them starts, on a link one of them names or on any other link of an axis
// and direction.
absl::Status CheckTogether(const Faults& faults, const std::string& field) {
  std::vector<int> starts;
  for (const SlowLink& s : faults.slow_links) starts.push_back(s.when.from_step);
  for (const Straggler& s : faults.stragglers) starts.push_back(s.when.from_step);
  for (const SlowLink& probe : faults.slow_links) {
    for (const int dir : {+1, -1}) {
      if (probe.src >= 0 ? dir != probe.dir : (probe.dir != 0 && dir != probe.dir)) continue;
      for (const int step : starts) {
        double bandwidth = 1, latency = 0;
        std::vector<size_t> which;
        for (size_t i = 0; i < faults.slow_links.size(); ++i) {
          const SlowLink& s = faults.slow_links[i];
          if (!s.when.Covers(step) || !s.Covers(probe.src, probe.dst, probe.axis, dir)) continue;
          bandwidth *= s.bandwidth;
          latency += s.extra_latency_s;
          which.push_back(i);
        }
        if (which.size() > 1 && (bandwidth < 1e-3 || latency > 1)) {
          return Bad(absl::StrCat(field, ": ", Entries("slow_links", which), " together at step ", step),
                     absl::StrCat(Fraction(bandwidth), " bandwidth, +", FormatSeconds(latency), " per hop"),
                     "slow links in force on one link at once multiply their bandwidths and add their latencies, "
                     "and together may slow it as much as one may: to 0.001 (1/1000) of its rate and 1 s more per "
                     "hop; give fewer, or windows (from/until) that do not overlap");
        }
      }
    }
  }
  for (const Straggler& probe : faults.stragglers) {
    for (const int step : starts) {
      double factor = 1;
      std::vector<size_t> which;
      for (size_t i = 0; i < faults.stragglers.size(); ++i) {
        const Straggler& s = faults.stragglers[i];
        if (s.chip != probe.chip || !s.when.Covers(step)) continue;
        factor *= s.factor;
        which.push_back(i);
      }
      if (which.size() > 1 && factor > 1000) {
        return Bad(absl::StrCat(field, ": ", Entries("stragglers", which), " together at step ", step),
                   absl::StrFormat("chip %d %gx slower", probe.chip, factor),
                   "stragglers in force on one chip at once multiply, and together may slow it at most 1000 times "
                   "as one may; give fewer, or windows (from/until) that do not overlap");
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckFaultValues(const Faults& faults, const std::string& field) {
  for (size_t i = 0; i < faults.slow_links.size(); ++i) {
    if (auto bad = CheckValues(faults.slow_links[i], absl::StrCat(field, ": slow_link ", i + 1)); !bad.ok()) return bad;
  }
  for (size_t i = 0; i < faults.stragglers.size(); ++i) {
    if (auto bad = CheckValues(faults.stragglers[i], absl::StrCat(field, ": straggler ", i + 1)); !bad.ok()) return bad;
  }
  for (size_t i = 0; i < faults.down_links.size(); ++i) {
    if (auto bad = CheckValues(faults.down_links[i], absl::StrCat(field, ": down_link ", i + 1)); !bad.ok()) return bad;
  }
  for (size_t i = 0; i < faults.workers.size(); ++i) {
    const std::string at = absl::StrCat(field, ": ", faults.workers[i].kill ? "kill_worker " : "pause_worker ", i + 1);
    if (auto bad = CheckValues(faults.workers[i], at); !bad.ok()) return bad;
  }
  const size_t entries =
      faults.slow_links.size() + faults.stragglers.size() + faults.down_links.size() + faults.workers.size();
  if (entries > kMaxFaults) {
    return Bad(field, absl::StrCat(entries, " faults"),
               absl::StrCat("at most ", kMaxFaults, " (far more than a study of faults needs; each is checked at every "
                            "step)"));
  }
  return CheckTogether(faults, field);
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
      if (auto bad = CheckLinkExists(topo, s.src, s.dst, s.axis, s.dir, at); !bad.ok()) return bad;
    }
  }
  for (size_t i = 0; i < faults.down_links.size(); ++i) {
    const DownLink& d = faults.down_links[i];
    const std::string at = absl::StrCat(field, ": down_link ", i + 1);
    if (!topo.HasAxis(d.axis)) {
      return Bad(at, AxisName(d.axis), absl::StrCat("this pod (", topo.Describe(), ") has no such axis"));
    }
    if (auto bad = CheckLinkExists(topo, d.src, d.dst, d.axis, d.dir, at); !bad.ok()) return bad;
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

absl::Status CheckFaultsBegin(const Faults& faults, int steps, const std::string& field) {
  const std::string allowed =
      steps == 1 ? "the job has one step, step 0: it would never happen"
                 : absl::StrCat("the job's steps are 0 to ", steps - 1, ": it would never happen");
  const auto check = [&](int first, const std::string& at) {
    return first < steps ? absl::OkStatus() : Bad(at, absl::StrCat(first), allowed);
  };
  for (size_t i = 0; i < faults.slow_links.size(); ++i) {
    if (auto bad = check(faults.slow_links[i].when.from_step, absl::StrCat(field, ": slow_link ", i + 1, " from"));
        !bad.ok()) {
      return bad;
    }
  }
  for (size_t i = 0; i < faults.down_links.size(); ++i) {
    if (auto bad = check(faults.down_links[i].when.from_step, absl::StrCat(field, ": down_link ", i + 1, " from"));
        !bad.ok()) {
      return bad;
    }
  }
  for (size_t i = 0; i < faults.stragglers.size(); ++i) {
    if (auto bad = check(faults.stragglers[i].when.from_step, absl::StrCat(field, ": straggler ", i + 1, " from"));
        !bad.ok()) {
      return bad;
    }
  }
  for (size_t i = 0; i < faults.workers.size(); ++i) {
    const WorkerFault& w = faults.workers[i];
    const std::string at = absl::StrCat(field, ": ", w.kill ? "kill_worker " : "pause_worker ", i + 1, " at");
    if (auto bad = check(w.at_step, at); !bad.ok()) return bad;
  }
  return absl::OkStatus();
}

absl::Status ParseSlowLink(const std::string& input, const std::string& flag, SlowLink* out) {
  static const char* kForms =
      "give LINKS@FRACTION[+LATENCY][ from STEP][ until STEP]: x@0.5, x+@0.5+2us, '0->1 x+@0.25 from 3 until 6'";
  std::string text = input;
  if (auto s = TakeWindow(text, flag, &out->when); !s.ok()) return s;
  std::vector<std::string> at = absl::StrSplit(text, '@');
  if (at.size() != 2) return Bad(flag, input, kForms);
  std::string which = at[0], how = at[1];
  // Which: "x", "x+", "x-", or "0->1 x+".
  if (which.find(' ') != std::string::npos) {
    if (auto s = ParseLinkName(which, flag, input, kForms, &out->src, &out->dst, &out->axis, &out->dir); !s.ok()) {
      return s;
    }
  } else {
    std::string axis_text = which;
    if (!axis_text.empty() && (axis_text.back() == '+' || axis_text.back() == '-')) {
      out->dir = axis_text.back() == '+' ? +1 : -1;
      axis_text.pop_back();
    }
    auto axis = ParseAxis(axis_text);
    if (!axis.ok()) return Bad(flag, input, absl::StrCat("'", axis_text, "' is not an axis: x, y, z or dcn"));
    out->axis = *axis;
  }
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
  if (auto s = TakeWindow(text, flag, &out->when); !s.ok()) return s;
  std::vector<std::string> at = absl::StrSplit(text, '@');
  if (at.size() != 2 || !absl::SimpleAtoi(at[0], &out->chip) || !absl::SimpleAtod(at[1], &out->factor)) {
    return Bad(flag, input,
               "give CHIP@FACTOR[ from STEP][ until STEP]: 3@2 (chip 3 computes 2x slower), '3@2 from 5 until 8'");
  }
  if (out->chip < 0) return Bad(flag, input, "a chip's number, 0 or more");
  return CheckValues(*out, absl::StrCat(flag, " '", input, "'"));
}

absl::Status ParseDownLink(const std::string& input, const std::string& flag, DownLink* out) {
  static const char* kForms = "give SRC->DST AXIS+|-[ from STEP][ until STEP]: '0->1 x+', '0->1 x+ from 3 until 6'";
  std::string text = input;
  if (auto s = TakeWindow(text, flag, &out->when); !s.ok()) return s;
  if (auto s = ParseLinkName(text, flag, input, kForms, &out->src, &out->dst, &out->axis, &out->dir); !s.ok()) {
    return s;
  }
  return CheckValues(*out, absl::StrCat(flag, " '", input, "'"));
}

absl::StatusOr<Faults> ParseFaultFlags(const std::vector<std::string>& slow_links,
                                       const std::vector<std::string>& stragglers,
                                       const std::vector<std::string>& down_links) {
  Faults faults;
  for (const std::string& text : slow_links) {
    if (auto s = ParseSlowLink(text, "--slow-link", &faults.slow_links.emplace_back()); !s.ok()) return s;
  }
  for (const std::string& text : stragglers) {
    if (auto s = ParseStraggler(text, "--straggler", &faults.stragglers.emplace_back()); !s.ok()) return s;
  }
  for (const std::string& text : down_links) {
    if (auto s = ParseDownLink(text, "--down-link", &faults.down_links.emplace_back()); !s.ok()) return s;
  }
  return faults;
}

absl::Status ParseOnDownLink(const std::string& text, const std::string& field, bool* route_around) {
  if (text != "fail" && text != "route") {
    return Bad(field, text, "fail (a collective that needs a down link fails, naming it) or route (a ring that "
                            "wraps goes the other way round)");
  }
  *route_around = text == "route";
  return absl::OkStatus();
}

}  // namespace tpuemu
