#include "core/collective/oracle.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/collective/executor.h"
#include "core/pod/link_clock.h"

namespace tpuemu {
namespace {

// The seed's rule on one axis: max(latency, bandwidth), 0 where it has none.
struct SeedTerms {
  double latency = 0;
  double transfer = 0;
};

SeedTerms SeedRule(CollectiveOp op, RingAlgorithm alg, int n, double v, LinkParams link) {
  const double w = link.bw_dir, t = link.latency;
  SeedTerms s;
  switch (op) {
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
      if (alg == RingAlgorithm::kBiRing) {
        // "|X|/2 hops", V / W_bidir.
        s.latency = t * n / 2.0;
        s.transfer = v / (2 * w);
      } else {
        // One direction (or a line, seed 000's v5e example): N-1 hops of V/N.
        s.latency = t * (n - 1);
        s.transfer = (n - 1) * v / (n * w);
      }
      return s;
    case CollectiveOp::kAllReduce: {
      s = SeedRule(CollectiveOp::kAllGather, alg, n, v, link);
      s.latency *= 2;
      s.transfer *= 2;
      return s;
    }
    case CollectiveOp::kAllToAll:
      if (alg != RingAlgorithm::kBiRing) return s;  // the seeds give a rule for bidirectional rings only
      s = SeedRule(CollectiveOp::kAllGather, alg, n, v, link);
      s.transfer /= 4;
      return s;
  }
  return s;
}

struct Split {
  std::vector<AxisPlan> ici;
  const AxisPlan* dcn = nullptr;
};

Split SplitAxes(const CollectivePlan& plan) {
  Split s;
  for (const AxisPlan& ap : plan.axes()) {
    if (ap.axis == Axis::kDcn) s.dcn = &ap; else s.ici.push_back(ap);
  }
  return s;
}

}  // namespace

int OracleHops(CollectiveOp op, RingAlgorithm alg, int n) {
  const int one = alg == RingAlgorithm::kBiRing ? n / 2 : n - 1;
  return op == CollectiveOp::kAllReduce ? 2 * one : one;
}

double OracleTransferSeconds(CollectiveOp op, RingAlgorithm alg, int n, double v, LinkParams link) {
  const double w = link.bw_dir;
  switch (op) {
    case CollectiveOp::kAllReduce:
      return 2 * OracleTransferSeconds(CollectiveOp::kReduceScatter, alg, n, v, link);
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
      // One shard V/n per hop, store and forward. The bidirectional ring's
      // busiest link carries (n-1)/2 shards (an even ring splits the shard
      // for the opposite chip); a unidirectional ring's or a line's n-1.
      if (alg == RingAlgorithm::kBiRing) return (n - 1) * v / (2.0 * n * w);
      return (n - 1) * v / (n * w);
    case CollectiveOp::kAllToAll: {
      const double block = v / (static_cast<double>(n) * n);
      if (alg == RingAlgorithm::kUniRing) return v * (n - 1) / (2.0 * n * w);
      if (alg == RingAlgorithm::kBiRing) {
        // Blocks go the short way; at distance n/2 (even n) half goes each way.
        double blocks = 0;
        for (int d = 1; d <= (n - 1) / 2; ++d) blocks += d;
        if (n % 2 == 0) blocks += n / 4.0;
        return blocks * block / w;
      }
      // Line: the busiest link (the middle one) carries (i+1)(n-1-i) blocks.
      double most = 0;
      for (int i = 0; i + 1 < n; ++i) most = std::max(most, static_cast<double>((i + 1) * (n - 1 - i)));
      return most * block / w;
    }
  }
  return 0;
}

double OracleChainSeconds(CollectiveOp op, RingAlgorithm alg, int n, double v, double chunk, LinkParams link,
                          const ReduceTime& reduce) {
  if (op == CollectiveOp::kAllReduce) {
    return OracleChainSeconds(CollectiveOp::kReduceScatter, alg, n, v, chunk, link, reduce) +
           OracleChainSeconds(CollectiveOp::kAllGather, alg, n, v, chunk, link, reduce);
  }
  const int hops = OracleHops(op, alg, n);  // an AllToAll's farthest block goes as far
  if (hops == 0) return 0;
  const double w = link.bw_dir;
  // The piece a link carries at each step: a shard (AllToAll: the link's
  // load spread over its steps). An even bidirectional ring's hop to or from
  // the opposite chip carries half a shard.
  const double piece = op == CollectiveOp::kAllToAll ? OracleTransferSeconds(op, alg, n, v, link) * w / hops : v / n;
  const bool halves = alg == RingAlgorithm::kBiRing && n % 2 == 0 && op != CollectiveOp::kAllToAll;
  const double whole = std::min(chunk, piece), half = std::min(chunk, halves ? piece / 2 : piece);
  if (op != CollectiveOp::kReduceScatter) {
    // Cut-through: the first chunk goes on the wire once, and each further
    // hop forwards it a slice behind (executor.h). The part that goes on
    // travels first, so an even ring's last hop ends with its half.
    return hops * link.latency + half / w + (hops - 1) * whole / w / kCutThroughSlices;
  }
  // A reduction forwards a chunk once it is in whole and added. On a
  // bidirectional ring both directions' chunks arrive together and are added
  // one after the other, so one direction waits for one more add.
  const double other_add = alg != RingAlgorithm::kBiRing ? 0 : reduce(halves && hops == 1 ? half : whole);
  if (halves && hops == 1) return link.latency + half / w + reduce(half) + other_add;
  // An even ring's first hop carries half a shard; the next sends its own
  // half first, while that half arrives and is added, once its link has
  // sent it.
  const double first = halves ? std::max(half / w, link.latency + reduce(half)) : link.latency + whole / w + reduce(whole);
  return first + (hops - 1) * (link.latency + whole / w + reduce(whole)) + other_add;
}

double OracleTailSeconds(CollectiveOp op, RingAlgorithm alg, int n, double v, double chunk, const ReduceTime& reduce) {
  if (op != CollectiveOp::kReduceScatter || n < 2) return 0;
  // The last chunk in from each direction (an even bidirectional ring of two
  // sends half a shard each way) is added after it arrives, one add at a
  // time on the chip's vector units.
  const bool bi = alg == RingAlgorithm::kBiRing;
  const double piece = bi && n == 2 ? v / 4 : v / n;
  const double last = piece - chunk * std::ceil(piece / chunk - 1);  // a shard's chunks: the last may be short
  return (bi ? 2 : 1) * reduce(last);
}

namespace {

// One stage of a collective: the busiest link's transfer time, the chain of
// hops of its slowest part, the busiest link's hop latency, and the adds
// after the last arrivals (reductions). Alone, a stage takes
// max(chain, busiest + hop + tail).
struct Stage {
  double busiest = 0, chain = 0, hop = 0, tail = 0;
  bool dcn = false;  // which links it loads: DCN's, or ICI's
};

Stage OneAxisStage(CollectiveOp op, const AxisPlan& axis, double v, double chunk, LinkParams link,
                   const ReduceTime& reduce) {
  return {OracleTransferSeconds(op, axis.algorithm, axis.size, v, link),
          OracleChainSeconds(op, axis.algorithm, axis.size, v, chunk, link, reduce), link.latency,
          OracleTailSeconds(op, axis.algorithm, axis.size, v, chunk, reduce), axis.axis == Axis::kDcn};
}

// The stages a planned collective runs, in order. An AllReduce is a
// ReduceScatter stage then an AllGather stage; a DCN phase is a stage in
// between (the DCN axis is first in every part's gather order, last in its
// reduce order, so all parts cross it together with the chip's whole 1/N_ici
// shard).
std::vector<Stage> PlanStages(const CollectivePlan& plan, const Topology& topo) {
  const CollectiveSpec& spec = plan.spec();
  const double v = static_cast<double>(spec.bytes);
  const int n = plan.group_size();
  const int k = plan.num_parts();
  const bool a2a = spec.op == CollectiveOp::kAllToAll;
  const bool all_reduce = spec.op == CollectiveOp::kAllReduce;
  const Split axes = SplitAxes(plan);
  // A wire chunk: chunk_bytes of host f32 elements, dtype_bytes each on the emulated wire.
  const double chunk = static_cast<double>(spec.chunk_bytes / sizeof(float) * spec.dtype_bytes);
  // A received chunk's add on the chip's vector units (executor.cc): it
  // reads two operands and writes the sum.
  const ChipProfile& chip = topo.profile();
  const ReduceTime reduce = [&chip, dtype = spec.dtype_bytes](double bytes) {
    return RooflineSeconds(chip, bytes / dtype, 3 * bytes);
  };
  const double dcn_factor = axes.dcn != nullptr && !a2a ? axes.dcn->size : 1;
  auto dcn_stage = [&](CollectiveOp op) {
    return OneAxisStage(op, *axes.dcn, v / n * axes.dcn->size, chunk, topo.Link(Axis::kDcn), reduce);
  };
  // Every part's phase on an axis loads that axis's links; the parts run at
  // once, so the busiest axis sets the transfer time; each part crosses every
  // axis, one after the other, so its chains of hops add up.
  auto ici_stage = [&](CollectiveOp op) {
    std::map<Axis, double> transfer;
    Stage ici;
    const double shard = static_cast<double>(plan.virtual_len()) / n;
    for (int p = 0; p < k; ++p) {
      const double fraction =
          a2a ? 1.0 / k : static_cast<double>(plan.part_offsets()[p + 1] - plan.part_offsets()[p]) / shard;
      double gathered = v / n * fraction * dcn_factor, part_chain = 0, part_tail = 0;
      for (size_t i = 0; i < axes.ici.size(); ++i) {
        const AxisPlan& ap = axes.ici[(i + p) % axes.ici.size()];
        const LinkParams link = topo.Link(ap.axis);
        // The array this phase moves: AllToAll's stays one chip's part; a
        // gather (or reduce-scatter) grows by each axis it crosses.
        const double array = a2a ? v / k / n * ap.size : (gathered *= ap.size);
        transfer[ap.axis] += OracleTransferSeconds(op, ap.algorithm, ap.size, array, link);
        part_chain += OracleChainSeconds(op, ap.algorithm, ap.size, array, chunk, link, reduce);
        // A reduction's last phase is its first axis in gather order.
        if (i == 0) part_tail = OracleTailSeconds(op, ap.algorithm, ap.size, array, chunk, reduce);
      }
      ici.chain = std::max(ici.chain, part_chain);
      ici.tail = std::max(ici.tail, part_tail);
    }
    for (const auto& [axis, seconds] : transfer) {
      if (seconds >= ici.busiest) ici.hop = topo.Link(axis).latency;
      ici.busiest = std::max(ici.busiest, seconds);
    }
    return ici;
  };
  // Gather order: DCN first; reduce order: DCN last.
  std::vector<Stage> stages;
  const CollectiveOp first = all_reduce ? CollectiveOp::kReduceScatter : spec.op;
  if (first == CollectiveOp::kReduceScatter && !axes.ici.empty()) stages.push_back(ici_stage(first));
  if (axes.dcn != nullptr) stages.push_back(dcn_stage(first));
  if (axes.dcn != nullptr && all_reduce) stages.push_back(dcn_stage(CollectiveOp::kAllGather));
  if (first != CollectiveOp::kReduceScatter && !axes.ici.empty()) stages.push_back(ici_stage(first));
  if (all_reduce && !axes.ici.empty()) stages.push_back(ici_stage(CollectiveOp::kAllGather));
  return stages;
}

}  // namespace

double PredictSeconds(const CollectivePlan& plan, const Topology& topo) {
  return PredictRepeatedSeconds(plan, topo, 1);
}

double PredictRepeatedSeconds(const CollectivePlan& plan, const Topology& topo, double count) {
  // The first collective takes its stages one after the other. The others
  // stream behind it through the links they share, which never idle while a
  // collective waits between its stages (a DCN hop's latency, an
  // AllReduce's barrier): for each kind of link, the stages before its first
  // stage, every collective's load on it, and what follows its last stage
  // (that stage's own hops, then the stages after it).
  const std::vector<Stage> stages = PlanStages(plan, topo);
  auto alone = [](const Stage& s) { return std::max(s.chain, s.busiest + s.hop + s.tail); };
  double first = 0;
  for (const Stage& s : stages) first += alone(s);
  double longest = first;
  for (bool dcn : {false, true}) {
    int from = -1, to = -1;
    double load = 0;
    for (int i = 0; i < static_cast<int>(stages.size()); ++i) {
      if (stages[i].dcn != dcn) continue;
      if (from < 0) from = i;
      to = i;
      load += stages[i].busiest;
    }
    if (from < 0) continue;
    double t = count * load + alone(stages[to]) - stages[to].busiest;
    for (int i = 0; i < static_cast<int>(stages.size()); ++i) {
      if (i < from || i > to) t += alone(stages[i]);
    }
    longest = std::max(longest, t);
  }
  return topo.profile().collective_startup + longest;
}

double PredictAxesSeconds(const Topology& topo, CollectiveOp op, const std::vector<Axis>& axes, double v_bytes,
                          double count) {
  CollectiveSpec spec;
  spec.op = op;
  spec.axes = axes;
  spec.dtype_bytes = 2;
  uint64_t n = 1, parts = 0;
  for (Axis a : axes) {
    n *= topo.AxisSize(a);
    if (a != Axis::kDcn) ++parts;
  }
  const uint64_t unit = n * std::max<uint64_t>(parts, 1) * (op == CollectiveOp::kAllToAll ? 2 * n : 1) * 2;
  spec.bytes = std::max<uint64_t>(1, static_cast<uint64_t>(v_bytes / unit + 0.5)) * unit;
  auto plan = CollectivePlan::CreateFor(topo, spec, {});
  return plan.ok() ? PredictRepeatedSeconds(*plan, topo, count) : 0;
}

std::string PredictAxesLabel(const std::vector<Axis>& axes) {
  std::vector<Axis> ici;
  bool dcn = false;
  for (Axis a : axes) {
    if (a == Axis::kDcn) dcn = true; else ici.push_back(a);
  }
  if (ici.empty()) return "DCN";
  const std::string label = "ICI " + AxesName(ici);
  return dcn ? label + ", then DCN (hierarchical)" : label;
}

double SeedFormulaSeconds(const CollectivePlan& plan, const Topology& topo) {
  const CollectiveSpec& spec = plan.spec();
  const double v = static_cast<double>(spec.bytes);
  const Split axes = SplitAxes(plan);
  double dcn_time = 0;
  int n_ici = 1;
  for (const AxisPlan& ap : axes.ici) n_ici *= ap.size;
  if (axes.dcn != nullptr) {
    // The DCN phase moves the 1/N_ici shard of every slice.
    const SeedTerms d = SeedRule(spec.op, axes.dcn->algorithm, axes.dcn->size, v / n_ici, topo.Link(Axis::kDcn));
    if (d.transfer == 0) return 0;
    dcn_time = std::max(d.latency, d.transfer);
  }
  if (axes.ici.empty()) return dcn_time;
  // The seeds' AllToAll rule (a quarter of an AllGather) is for one ring; a
  // torus AllToAll loads each axis far less, and they give no rule for it.
  if (spec.op == CollectiveOp::kAllToAll && axes.ici.size() > 1) return 0;
  // Several axes: the longest path's latency, and the axes' bandwidths added
  // (V / (W_bidir x n_axes) when every axis is a bidirectional ring).
  double latency = 0, rate = 0;
  for (const AxisPlan& ap : axes.ici) {
    const SeedTerms s = SeedRule(spec.op, ap.algorithm, ap.size, v, topo.Link(ap.axis));
    if (s.transfer == 0) return 0;
    latency += s.latency;
    rate += 1 / s.transfer;
  }
  return dcn_time + std::max(latency, 1 / rate);
}

}  // namespace tpuemu
