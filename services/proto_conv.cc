#include "services/proto_conv.h"

namespace tpuemu {
namespace {

v1::LinkUse ToProto(const LinkUse& l) {
  v1::LinkUse p;
  p.set_src(l.src);
  p.set_dst(l.dst);
  p.set_axis(AxisName(l.axis));
  p.set_dir(l.dir);
  p.set_emu_bytes(l.emu_bytes);
  return p;
}

}  // namespace

v1::CollectiveSpec ToProto(const CollectiveSpec& spec) {
  v1::CollectiveSpec p;
  p.set_op(OpName(spec.op));
  for (Axis a : spec.axes) p.add_axes(AxisName(a));
  p.set_bytes(spec.bytes);
  p.set_algorithm(AlgorithmName(spec.algorithm));
  p.set_dtype_bytes(spec.dtype_bytes);
  p.set_seed(spec.seed);
  p.set_chunk_bytes(spec.chunk_bytes);
  return p;
}

absl::StatusOr<CollectiveSpec> FromProto(const v1::CollectiveSpec& p) {
  CollectiveSpec spec;
  auto op = ParseOp(p.op());
  if (!op.ok()) return op.status();
  spec.op = *op;
  for (const std::string& name : p.axes()) {
    auto axis = ParseAxis(name);
    if (!axis.ok()) return axis.status();
    spec.axes.push_back(*axis);
  }
  auto alg = ParseAlgorithm(p.algorithm().empty() ? "auto" : p.algorithm());
  if (!alg.ok()) return alg.status();
  spec.algorithm = *alg;
  spec.bytes = p.bytes();
  if (p.dtype_bytes() != 0) spec.dtype_bytes = p.dtype_bytes();
  if (p.seed() != 0) spec.seed = p.seed();
  if (p.chunk_bytes() != 0) spec.chunk_bytes = p.chunk_bytes();
  return spec;
}

v1::TopologySpec ToProto(const TopologyRequest& req, double time_scale) {
  v1::TopologySpec p;
  p.set_topology(req.topology);
  p.set_slices(req.slices);
  p.set_chips_per_host(req.chips_per_host);
  p.set_wraparound(req.wraparound);
  p.set_time_scale(time_scale);
  return p;
}

TopologyRequest FromProto(const v1::TopologySpec& p) {
  return {p.topology(), p.slices(), p.chips_per_host(), p.wraparound().empty() ? "auto" : p.wraparound()};
}

v1::ChipResult ToProto(const ChipRunResult& r) {
  v1::ChipResult p;
  p.set_chip(r.chip);
  p.set_emulated_s(r.emulated_s);
  p.set_wall_s(r.wall_s);
  p.set_host_lag_s(r.host_lag_s);
  p.set_mismatches(r.mismatches);
  for (const LinkUse& l : r.links) *p.add_links() = ToProto(l);
  return p;
}

absl::StatusOr<ChipRunResult> FromProto(const v1::ChipResult& p) {
  ChipRunResult r;
  r.chip = p.chip();
  r.emulated_s = p.emulated_s();
  r.wall_s = p.wall_s();
  r.host_lag_s = p.host_lag_s();
  r.mismatches = p.mismatches();
  for (const v1::LinkUse& l : p.links()) {
    auto axis = ParseAxis(l.axis());
    if (!axis.ok()) return axis.status();
    r.links.push_back({l.src(), l.dst(), *axis, l.dir(), l.emu_bytes()});
  }
  return r;
}

v1::CollectiveResult ToProto(const CollectiveReport& r) {
  v1::CollectiveResult p;
  p.set_op(r.op);
  p.set_axes(r.axes);
  p.set_algorithm(r.algorithm);
  p.set_n(r.n);
  p.set_bytes(r.bytes);
  p.set_dtype_bytes(r.dtype_bytes);
  p.set_emulated_s(r.emulated_s);
  p.set_predicted_s(r.predicted_s);
  p.set_ratio(r.ratio);
  p.set_wall_s(r.wall_s);
  p.set_algbw_gbps(r.algbw_gbps);
  p.set_busbw_gbps(r.busbw_gbps);
  p.set_emulated_algbw_gbps(r.emulated_algbw_gbps);
  p.set_emulated_busbw_gbps(r.emulated_busbw_gbps);
  p.set_host_lag_s(r.host_lag_s);
  p.set_correct(r.correct);
  p.set_mismatches(r.mismatches);
  for (const LinkUse& l : r.links) *p.add_links() = ToProto(l);
  return p;
}

}  // namespace tpuemu
