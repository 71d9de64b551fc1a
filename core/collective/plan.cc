#include "core/collective/plan.h"

#include "core/collective/axis_parts.h"

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/field.h"
#include "core/base/units.h"
#include "core/pod/host_memory.h"

namespace tpuemu {
namespace {

enum class PhaseKind { kGather, kReduceScatter, kAllToAll };

struct Phase {
  int order_index;  // which axis of the part's order
  PhaseKind kind;
};

// Calls fn(rank) for every rank whose coordinate on spec axis m is fixed[m],
// or any value where fixed[m] < 0: those from origin[m] on, round the axis
// (from 0 without an origin).
void ForEachRank(const std::vector<int>& sizes, const std::vector<int>& fixed, const std::function<void(int)>& fn,
                 const std::vector<int>* origin = nullptr) {
  const int m = static_cast<int>(sizes.size());
  std::vector<int> moved(m, 0);  // steps taken round each free axis
  while (true) {
    int rank = 0;
    for (int i = 0; i < m; ++i) {
      const int c = fixed[i] >= 0 ? fixed[i] : ((origin != nullptr ? (*origin)[i] : 0) + moved[i]) % sizes[i];
      rank = rank * sizes[i] + c;
    }
    fn(rank);
    int i = m - 1;
    for (; i >= 0; --i) {
      if (fixed[i] >= 0) continue;
      if (++moved[i] < sizes[i]) break;
      moved[i] = 0;
    }
    if (i < 0) return;
  }
}

// The part of r a hop carries: all of it, or its first or second half.
Range HalfOf(Range r, int half) {
  if (half == 0) return r;
  const uint64_t first = r.len / 2;
  return half == 1 ? Range{r.offset, first} : Range{r.offset + first, r.len - first};
}

// Joins ranges that follow each other, in the order given (sorted first
// unless `keep_order`).
std::vector<Range> Merge(std::vector<Range> ranges, bool keep_order) {
  if (!keep_order) {
    std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.offset < b.offset; });
  }
  std::vector<Range> out;
  for (const Range& r : ranges) {
    if (r.len == 0) continue;
    if (!out.empty() && out.back().end() == r.offset) {
      out.back().len += r.len;
    } else {
      out.push_back(r);
    }
  }
  return out;
}

// What a phase of `kind` on axis `ap` sends: a one-way ring routed around a
// down link sends every phase `ap.way`; otherwise the schedules' defaults.
std::vector<Hop> PhaseHops(const AxisPlan& ap, PhaseKind kind) {
  switch (kind) {
    case PhaseKind::kGather: return AllGatherHops(ap.size, ap.algorithm, ap.way != 0 ? ap.way : +1);
    case PhaseKind::kReduceScatter: return ReduceScatterHops(ap.size, ap.algorithm, ap.way != 0 ? ap.way : -1);
    case PhaseKind::kAllToAll: return AllToAllHops(ap.size, ap.algorithm, ap.way != 0 ? ap.way : +1);
  }
  return {};
}

// A per-axis table over chip positions (spec axis m), from PhaseHops.
struct HopTable {
  int m = 0;
  std::vector<std::vector<int>> steps;
};

// [position][block]: the first step at which a ReduceScatter phase's `hops`
// (on an axis of `size`) send the chip's partial sum of a block (never: a
// large number).
HopTable FirstSendSteps(const std::vector<Hop>& hops, int m, int size) {
  HopTable t{m, std::vector<std::vector<int>>(size, std::vector<int>(size, 1 << 30))};
  for (const Hop& h : hops) t.steps[h.from][h.block] = std::min(t.steps[h.from][h.block], h.step);
  return t;
}

// [from][to]: the hops an AllToAll phase's `hops` take a block over (the
// step at which it arrives).
HopTable PathHops(const std::vector<Hop>& hops, int m, int size) {
  HopTable t{m, std::vector<std::vector<int>>(size, std::vector<int>(size, 0))};
  for (const Hop& h : hops) t.steps[h.block][h.dest] = std::max(t.steps[h.block][h.dest], h.step);
  return t;
}

// Stable-sorts `items` by key(item), each key made once.
template <typename T, typename KeyFn>
void SortByKey(std::vector<T>* items, KeyFn key) {
  std::vector<std::pair<std::vector<int>, size_t>> keyed;
  keyed.reserve(items->size());
  for (size_t i = 0; i < items->size(); ++i) keyed.push_back({key((*items)[i]), i});
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<T> sorted;
  sorted.reserve(items->size());
  for (const auto& [_, i] : keyed) sorted.push_back((*items)[i]);
  *items = std::move(sorted);
}

std::vector<PhaseKind> PhaseKinds(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllGather: return {PhaseKind::kGather};
    case CollectiveOp::kReduceScatter: return {PhaseKind::kReduceScatter};
    case CollectiveOp::kAllReduce: return {PhaseKind::kReduceScatter, PhaseKind::kGather};
    case CollectiveOp::kAllToAll: return {PhaseKind::kAllToAll};
  }
  return {};
}

// The first down link in `down` that the phases of `op` on `ap` send over
// (every line of the axis runs the same hops), or null.
const DownLink* FirstUsed(const Topology& topo, CollectiveOp op, const AxisPlan& ap,
                          const std::vector<const DownLink*>& down) {
  for (PhaseKind kind : PhaseKinds(op)) {
    for (const Hop& h : PhaseHops(ap, kind)) {
      for (const DownLink* d : down) {
        if (h.dir == d->dir && h.from == topo.CoordOf(d->src).Get(ap.axis)) return d;
      }
    }
  }
  return nullptr;
}

// Leaves `ap` alone when its schedule needs none of the down links in force
// along its axis; routes it the other way round its ring when the spec asks
// and a ring can (one-way, against the links that are down); else an error
// naming the link.
absl::Status AvoidDownLinks(const Topology& topo, const CollectiveSpec& spec, AxisPlan* ap) {
  std::vector<const DownLink*> down;
  for (int i : spec.faults.DownAt(spec.fault_step)) {
    if (spec.faults.down_links[i].axis == ap->axis) down.push_back(&spec.faults.down_links[i]);
  }
  const DownLink* used = FirstUsed(topo, spec.op, *ap, down);
  if (used == nullptr) return absl::OkStatus();
  // Plain words, not Field(): a training job's file and bench collective's flags both meet this.
  const std::string needs = absl::StrCat("faults: ", used->Describe(), ": the ", OpName(spec.op), " over ",
                                         AxisName(ap->axis), " (", AlgorithmName(ap->algorithm), ") needs it");
  if (ap->algorithm == RingAlgorithm::kLine) {
    return absl::InvalidArgumentError(absl::StrCat(needs, ", and the axis does not wrap: there is no other way round"));
  }
  if (!spec.faults.route_around) {
    return absl::InvalidArgumentError(absl::StrCat(
        needs, "; to go the other way round the ring instead, give on_down_link: route (a job file's key) or "
               "--on-down-link route (bench collective, tpuemu fault)"));
  }
  for (const DownLink* d : down) {
    if (d->dir != used->dir) {
      return absl::InvalidArgumentError(absl::StrCat(needs, ", and ", d->Describe(),
                                                     " blocks the other way round: links are down both ways along ",
                                                     AxisName(ap->axis)));
    }
  }
  ap->algorithm = RingAlgorithm::kUniRing;
  ap->way = -used->dir;
  return absl::OkStatus();
}

}  // namespace

uint64_t PlannedTransfer::elements() const {
  uint64_t n = 0;
  for (const Range& r : ranges) n += r.len;
  return n;
}

absl::StatusOr<CollectivePlan> CollectivePlan::Create(const Topology& topo, const CollectiveSpec& spec) {
  return Make(topo, spec, nullptr);
}

absl::StatusOr<CollectivePlan> CollectivePlan::CreateFor(const Topology& topo, const CollectiveSpec& spec,
                                                         const std::vector<int>& chips) {
  return Make(topo, spec, &chips);
}

absl::StatusOr<CollectivePlan> CollectivePlan::Make(const Topology& topo, const CollectiveSpec& spec,
                                                    const std::vector<int>* chips) {
  CollectivePlan plan;
  plan.topo_ = topo;
  plan.spec_ = spec;
  if (spec.axes.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Field("axes"), ": empty; name at least one of the pod's axes (x, y, z, dcn)"));
  }
  std::vector<std::string> have;
  for (Axis a : {Axis::kX, Axis::kY, Axis::kZ, Axis::kDcn}) {
    if (topo.HasAxis(a)) have.push_back(AxisName(a));
  }
  for (Axis a : spec.axes) {
    if (!topo.HasAxis(a)) {
      return absl::InvalidArgumentError(absl::StrCat(
          Field("axes"), " '", AxesName(spec.axes), "': the pod (", topo.Describe(), ") has no axis ", AxisName(a),
          a == Axis::kDcn ? absl::StrCat(" (start the pod with ", Field("slices"), " 2 or more)") : "",
          "; its axes are: ", absl::StrJoin(have, ", ")));
    }
    if (topo.AxisSize(a) < 2) {
      return absl::InvalidArgumentError(absl::StrCat(Field("axes"), " '", AxesName(spec.axes), "': axis ", AxisName(a),
                                                     " has size 1 in ", topo.ShapeString(),
                                                     ", so there is nothing to communicate along it"));
    }
  }
  if (spec.dtype_bytes != 2 && spec.dtype_bytes != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(Field("dtype"), ": element size ", spec.dtype_bytes, " bytes is not supported; allowed: bf16, f32"));
  }
  if (spec.chunk_bytes < 1024 || spec.chunk_bytes > kMaxChunkBytes || spec.chunk_bytes % 4 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(Field("chunk"), " ", FormatBytes(spec.chunk_bytes), " (",
                                                   spec.chunk_bytes,
                                                   " bytes): a multiple of 4 bytes from 1KiB to ",
                                                   FormatBytes(kMaxChunkBytes), " allowed"));
  }

  std::vector<int> sizes;
  std::vector<Axis> ici;
  bool has_dcn = false;
  for (Axis a : spec.axes) {
    auto alg = ResolveAlgorithm(spec.algorithm, topo.AxisWraps(a), AxisName(a), topo.Describe());
    if (!alg.ok()) return alg.status();
    AxisPlan ap{a, topo.AxisSize(a), *alg};
    if (auto s = AvoidDownLinks(topo, spec, &ap); !s.ok()) return s;
    plan.axes_.push_back(ap);
    sizes.push_back(topo.AxisSize(a));
    plan.group_size_ *= topo.AxisSize(a);
    if (a == Axis::kDcn) has_dcn = true; else ici.push_back(a);
  }
  const int n = plan.group_size_;
  const int k = std::max<int>(1, ici.size());
  plan.num_parts_ = k;
  const uint64_t v = spec.elements();
  const bool a2a = spec.op == CollectiveOp::kAllToAll;
  // A gather's or reduction's parts are sized by their share of the links
  // (axis_parts.h), not equal: each chip's shard need only hold an element
  // for each part. An AllToAll's blocks split evenly into parts and halves.
  const uint64_t unit = a2a ? static_cast<uint64_t>(n) * n * k * 2 : static_cast<uint64_t>(n);
  if (spec.bytes == 0 || spec.bytes % spec.dtype_bytes != 0 || v % unit != 0 || v / n < static_cast<uint64_t>(k)) {
    return absl::InvalidArgumentError(absl::StrCat(
        Field("bytes"), " ", FormatBytes(spec.bytes), ": the array must split evenly over the ", n,
        " chips of the group",
        a2a ? absl::StrCat(" into ", n, "x", n, " blocks") : "", a2a && k > 1 ? absl::StrCat(" and ", k, " axis parts") : "",
        a2a ? " and halves" : "", !a2a && k > 1 ? absl::StrCat(", at least ", k, " elements each (one per axis part)") : "",
        "; use a multiple of ", unit * spec.dtype_bytes, " bytes"));
  }
  plan.virtual_len_ = v;

  // Position of each spec axis in the rank, and the part orders.
  std::map<Axis, int> spec_index;
  for (size_t m = 0; m < spec.axes.size(); ++m) spec_index[spec.axes[m]] = static_cast<int>(m);
  std::vector<int> strides(sizes.size(), 1);  // of each spec axis in a rank
  for (int m = static_cast<int>(sizes.size()) - 2; m >= 0; --m) strides[m] = strides[m + 1] * sizes[m + 1];
  const uint64_t shard = v / n;
  // AllGather/ReduceScatter: each shard's piece per part, sized so that
  // every ICI axis's links carry the same load (axis_parts.h).
  std::vector<AxisPlan> ici_plans;
  for (const AxisPlan& ap : plan.axes_) {
    if (ap.axis != Axis::kDcn) ici_plans.push_back(ap);
  }
  const std::vector<double> fractions = PartFractions(ici_plans, topo);
  plan.part_offsets_.assign(k + 1, 0);
  for (int p = 0; p < k; ++p) {
    const uint64_t len = p + 1 < k ? static_cast<uint64_t>(fractions[p] * static_cast<double>(shard))
                                   : shard - plan.part_offsets_[p];
    plan.part_offsets_[p + 1] = std::min(shard, plan.part_offsets_[p] + len);
  }
  const uint64_t block = v / (static_cast<uint64_t>(n) * n);  // AllToAll block
  const uint64_t a2a_part = block / k;
  std::vector<int> wanted;  // sorted, for a restricted plan
  if (chips != nullptr) {
    wanted = *chips;
    std::sort(wanted.begin(), wanted.end());
  }
  auto is_wanted = [&](int chip) {
    return chips == nullptr || std::binary_search(wanted.begin(), wanted.end(), chip);
  };

  // Each spec axis's hops for every kind of phase the op runs, and the table
  // its pieces are ordered by (ReduceScatter: first sends; AllToAll: paths),
  // made once for all parts and phases.
  std::vector<std::map<PhaseKind, std::vector<Hop>>> axis_hops(plan.axes_.size());
  std::vector<HopTable> tables(plan.axes_.size());
  for (size_t m = 0; m < plan.axes_.size(); ++m) {
    for (PhaseKind kind : PhaseKinds(spec.op)) axis_hops[m][kind] = PhaseHops(plan.axes_[m], kind);
    if (spec.op == CollectiveOp::kAllToAll) {
      tables[m] = PathHops(axis_hops[m][PhaseKind::kAllToAll], static_cast<int>(m), plan.axes_[m].size);
    } else if (spec.op != CollectiveOp::kAllGather) {
      tables[m] = FirstSendSteps(axis_hops[m][PhaseKind::kReduceScatter], static_cast<int>(m), plan.axes_[m].size);
    }
  }
  auto hops_of = [&](int m, PhaseKind kind) -> const std::vector<Hop>& { return axis_hops[m].at(kind); };

  for (int p = 0; p < k; ++p) {
    std::vector<Axis> order;
    if (has_dcn) order.push_back(Axis::kDcn);
    for (int i = 0; i < static_cast<int>(ici.size()); ++i) order.push_back(ici[(i + p) % ici.size()]);
    const int depth = static_cast<int>(order.size());

    std::vector<Phase> phases;
    switch (spec.op) {
      case CollectiveOp::kAllGather:
        for (int i = 0; i < depth; ++i) phases.push_back({i, PhaseKind::kGather});
        break;
      case CollectiveOp::kReduceScatter:
        for (int i = depth - 1; i >= 0; --i) phases.push_back({i, PhaseKind::kReduceScatter});
        break;
      case CollectiveOp::kAllReduce:
        for (int i = depth - 1; i >= 0; --i) phases.push_back({i, PhaseKind::kReduceScatter});
        for (int i = 0; i < depth; ++i) phases.push_back({i, PhaseKind::kGather});
        break;
      case CollectiveOp::kAllToAll:
        for (int i = 0; i < depth; ++i) phases.push_back({i, PhaseKind::kAllToAll});
        break;
    }

    int part_steps = 0;  // the part's steps, all phases
    for (const Phase& phase : phases) part_steps += NumSteps(hops_of(spec_index[order[phase.order_index]], phase.kind));
    int local_step = 0;  // part-local steps already used
    int stage = 0;
    for (int phase_index = 0; phase_index < static_cast<int>(phases.size()); ++phase_index) {
      const Phase& phase = phases[phase_index];
      const Axis a = order[phase.order_index];
      // ICI phases in a row of one kind are one stage: each forwards data as
      // soon as the one before delivers it. The DCN phase is a stage of its
      // own, and an AllReduce's AllGather starts once its ReduceScatter ended.
      if (phase_index > 0) {
        const Phase& before = phases[phase_index - 1];
        if (a == Axis::kDcn || order[before.order_index] == Axis::kDcn || before.kind != phase.kind) ++stage;
      }
      const int m_a = spec_index[a];
      const AxisPlan& ap = plan.axes_[m_a];
      const std::vector<Hop>& hops = hops_of(m_a, phase.kind);
      const bool split = ap.algorithm == RingAlgorithm::kBiRing && ap.size % 2 == 0;
      // Group the hops that share a link and a step into one transfer, a
      // step's transfers by direction before position, so that every chip
      // lists its own in the same order wherever it sits on the ring.
      std::map<std::tuple<int, int, int, int>, std::vector<Hop>> grouped;
      for (const Hop& h : hops) grouped[{h.step, h.dir, h.from, h.to}].push_back(h);

      // Spec-axis status for this phase: done before (routed/gathered), now, after.
      auto before = [&](int m) {
        for (int j = 0; j < phase.order_index; ++j) if (spec_index[order[j]] == m) return true;
        return false;
      };

      // The order of the pieces in a transfer (their data is the same in
      // any order; the order decides what goes on the link first):
      // - a ReduceScatter phase sends them in the order the part's later
      //   ReduceScatter phases need them on the chip it delivers to, so each
      //   can start on what arrives first (a range is final only once the
      //   phase's last step has reduced it);
      // - an AllToAll phase sends blocks with more hops still to go in the
      //   part first (the longest path starts first), then in the order they
      //   reached the chip in its earlier phases, so a send streams behind
      //   its data.
      std::vector<const HopTable*> later_rs, a2a_later, a2a_earlier;
      for (int j = phase_index + 1; j < static_cast<int>(phases.size()); ++j) {
        if (phases[j].kind != phase.kind) break;
        const int m = spec_index[order[phases[j].order_index]];
        if (phase.kind == PhaseKind::kReduceScatter) later_rs.push_back(&tables[m]);
        if (phase.kind == PhaseKind::kAllToAll) a2a_later.push_back(&tables[m]);
      }
      if (phase.kind == PhaseKind::kAllToAll) {
        for (int j = phase_index - 1; j >= 0; --j) a2a_earlier.push_back(&tables[spec_index[order[phases[j].order_index]]]);
      }
      auto coord = [&](int rank, int m) { return (rank / strides[m]) % sizes[m]; };

      // One representative per line along a (its chip at a = 0), in chip
      // order; a restricted plan visits only the lines of its chips.
      std::vector<int> lines;
      if (chips == nullptr) {
        for (int chip = 0; chip < topo.num_chips(); ++chip) {
          if (topo.CoordOf(chip).Get(a) == 0) lines.push_back(chip);
        }
      } else {
        for (int chip : wanted) {
          Coord line = topo.CoordOf(chip);
          line.Set(a, 0);
          lines.push_back(topo.ChipId(line));
        }
        std::sort(lines.begin(), lines.end());
        lines.erase(std::unique(lines.begin(), lines.end()), lines.end());
      }
      for (int rep : lines) {
        const Coord line = topo.CoordOf(rep);
        for (const auto& [key, group] : grouped) {
          const auto& [step, dir, from, to] = key;
          Coord src = line, dst = line;
          src.Set(a, from);
          dst.Set(a, to);
          PlannedTransfer t;
          t.src = topo.ChipId(src);
          t.dst = topo.ChipId(dst);
          if (!is_wanted(t.src) && !is_wanted(t.dst)) continue;
          t.step = (local_step + step - 1) * k + p;
          t.axis = a;
          t.dir = dir;
          t.reduce = phase.kind == PhaseKind::kReduceScatter;
          t.part = p;
          t.stage = stage;
          std::vector<Range> last_hops;  // AllToAll blocks that yield the link (below)
          for (const Hop& h : group) {
            const int nm = static_cast<int>(sizes.size());
            if (phase.kind != PhaseKind::kAllToAll) {
              std::vector<int> fixed(nm);
              for (int m = 0; m < nm; ++m) fixed[m] = before(m) ? -1 : line.Get(spec.axes[m]);
              fixed[m_a] = h.block;
              // On an even bidirectional ring, a whole piece going `-` sends
              // its second half first: the half that the last hop carries
              // that way (AllGather), or that no hop reduced into before
              // (ReduceScatter), so the next hop can start sooner.
              const bool second_first = split && h.half == 0 && dir < 0;
              // Pieces from the line's own coordinates on: every line lists
              // its pieces alike, so a chip's program is the same wherever
              // it sits on a torus (core/job/symmetric_pod.h).
              std::vector<int> origin(nm);
              for (int m = 0; m < nm; ++m) origin[m] = line.Get(spec.axes[m]);
              std::vector<int> ranks;
              ForEachRank(sizes, fixed, [&](int r) { ranks.push_back(r); }, &origin);
              if (!later_rs.empty()) {
                SortByKey(&ranks, [&](int r) {
                  std::vector<int> steps;
                  for (const HopTable* t : later_rs) steps.push_back(t->steps[line.Get(spec.axes[t->m])][coord(r, t->m)]);
                  return steps;
                });
              }
              for (int r : ranks) {
                const Range piece{r * shard + plan.part_offsets_[p], plan.part_offsets_[p + 1] - plan.part_offsets_[p]};
                if (second_first) t.ranges.push_back(HalfOf(piece, 2));
                t.ranges.push_back(HalfOf(piece, second_first ? 1 : h.half));
              }
            } else {
              std::vector<int> fixed_r(nm), fixed_q(nm);
              for (int m = 0; m < nm; ++m) {
                fixed_r[m] = before(m) ? -1 : line.Get(spec.axes[m]);
                fixed_q[m] = before(m) ? line.Get(spec.axes[m]) : -1;
              }
              fixed_r[m_a] = h.block;
              fixed_q[m_a] = h.dest;
              std::vector<std::pair<int, int>> blocks;  // (source, destination) ranks
              ForEachRank(sizes, fixed_r, [&](int r) {
                ForEachRank(sizes, fixed_q, [&](int q) { blocks.push_back({r, q}); });
              });
              auto to_go = [&](const std::pair<int, int>& b) {  // hops after this one
                int hops = 0;
                for (const HopTable* t : a2a_later) hops += t->steps[line.Get(spec.axes[t->m])][coord(b.second, t->m)];
                return hops;
              };
              // Sorted by key, whose first entry is minus the hops to go.
              SortByKey(&blocks, [&](const std::pair<int, int>& b) {
                std::vector<int> steps{-to_go(b)};
                for (const HopTable* t : a2a_earlier) steps.push_back(t->steps[coord(b.first, t->m)][line.Get(spec.axes[t->m])]);
                return steps;
              });
              for (const auto& [r, q] : blocks) {
                const Range range = HalfOf({(static_cast<uint64_t>(r) * n + q) * block + p * a2a_part, a2a_part}, h.half);
                // Over several axes, a block on its last hop yields the link
                // to blocks still travelling: it goes after the part's last step.
                const bool last_hop = k > 1 && h.to == h.dest && to_go({r, q}) == 0;
                (last_hop ? last_hops : t.ranges).push_back(range);
              }
            }
          }
          if (!last_hops.empty()) {
            PlannedTransfer yielding = t;
            yielding.ranges = Merge(std::move(last_hops), /*keep_order=*/true);
            yielding.step = part_steps * k + p;
            yielding.after_all_before = true;
            plan.transfers_.push_back(std::move(yielding));
          }
          t.ranges = Merge(std::move(t.ranges), /*keep_order=*/true);
          if (t.elements() == 0) continue;  // half of a one-element piece
          plan.transfers_.push_back(std::move(t));
        }
      }
      local_step += NumSteps(hops);
    }
    plan.num_steps_ = std::max(plan.num_steps_, (local_step + (a2a && k > 1 ? 1 : 0)) * k);  // + the yielding last hops
  }
  std::stable_sort(plan.transfers_.begin(), plan.transfers_.end(), [](const PlannedTransfer& a, const PlannedTransfer& b) {
    return a.step != b.step ? a.step < b.step : a.after_all_before < b.after_all_before;
  });
  return plan;
}

uint64_t CollectivePlan::input_len() const {
  const uint64_t v = virtual_len_;
  switch (spec_.op) {
    case CollectiveOp::kAllGather: return v / group_size_;
    case CollectiveOp::kAllToAll: return v / group_size_;
    default: return v;
  }
}

uint64_t CollectivePlan::output_len() const {
  const uint64_t v = virtual_len_;
  switch (spec_.op) {
    case CollectiveOp::kReduceScatter: return v / group_size_;
    case CollectiveOp::kAllToAll: return v / group_size_;
    default: return v;
  }
}

int CollectivePlan::GroupRank(int chip) const {
  const Coord c = topo_.CoordOf(chip);
  int rank = 0;
  for (const AxisPlan& ap : axes_) rank = rank * ap.size + c.Get(ap.axis);
  return rank;
}

std::vector<Range> CollectivePlan::InputRanges(int chip) const {
  const uint64_t n = group_size_, v = virtual_len_, r = GroupRank(chip);
  switch (spec_.op) {
    case CollectiveOp::kAllGather: return {{r * (v / n), v / n}};
    case CollectiveOp::kAllToAll: return {{r * (v / n), v / n}};
    default: return {{0, v}};
  }
}

std::vector<Range> CollectivePlan::ResultRanges(int chip) const {
  const uint64_t n = group_size_, v = virtual_len_, r = GroupRank(chip);
  switch (spec_.op) {
    case CollectiveOp::kReduceScatter: return {{r * (v / n), v / n}};
    case CollectiveOp::kAllToAll: {
      const uint64_t block = v / (n * n);
      std::vector<Range> out;
      for (uint64_t o = 0; o < n; ++o) out.push_back({(o * n + r) * block, block});
      return out;
    }
    default: return {{0, v}};
  }
}

std::string CollectivePlan::AlgorithmLabel() const {
  auto name = [](const AxisPlan& ap) {
    return AlgorithmName(ap.algorithm) + (ap.way > 0 ? " going +" : ap.way < 0 ? " going -" : "");
  };
  bool same = true;
  for (const AxisPlan& ap : axes_) same = same && name(ap) == name(axes_[0]);
  if (same) return name(axes_[0]);
  std::vector<std::string> parts;
  for (const AxisPlan& ap : axes_) parts.push_back(AxisName(ap.axis) + ":" + name(ap));
  return absl::StrJoin(parts, ",");
}

std::vector<std::string> CollectivePlan::Routed() const {
  std::vector<std::string> routed;
  for (const AxisPlan& ap : axes_) {
    if (ap.way != 0) {
      routed.push_back(absl::StrCat(AxisName(ap.axis), " routed round its down link(s): a one-way ring going ",
                                    ap.way > 0 ? "+" : "-"));
    }
  }
  return routed;
}

double CollectiveHostBytes(const CollectivePlan& plan, const Topology& topo) {
  return 2.0 * sizeof(float) * static_cast<double>(plan.virtual_len()) * topo.num_chips();
}

absl::StatusOr<CollectivePlan> PlanCollectiveJob(const Topology& topo, const CollectiveSpec& spec) {
  if (auto s = CheckFaults(spec.faults, topo, Field("faults")); !s.ok()) return s;
  if (!spec.faults.workers.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(Field("faults"), ": kill_worker and pause_worker are for training "
                                                   "jobs (a collective has one step)"));
  }
  if (auto s = CheckFaultsBegin(spec.faults, 1, Field("faults")); !s.ok()) return s;
  auto plan = CollectivePlan::CreateFor(topo, spec, {});
  if (!plan.ok()) return plan.status();
  if (auto s = CheckPodHostBytes(CollectiveHostBytes(*plan, topo), topo.num_chips(),
                                 absl::StrCat(Field("bytes"), " ", FormatBytes(spec.bytes), " (", OpName(spec.op), " over ",
                                              AxesName(spec.axes), ")"),
                                 absl::StrCat("use a smaller ", Field("bytes")));
      !s.ok()) {
    return s;
  }
  return plan;
}

}  // namespace tpuemu
