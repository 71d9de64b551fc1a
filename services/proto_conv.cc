#include "services/proto_conv.h"

#include <algorithm>

namespace tpuemu {
namespace {

v1::MatmulCandidate ToProto(const MatmulCandidate& c) {
  v1::MatmulCandidate p;
  p.set_summary(c.summary);
  for (const MatmulStep& s : c.steps) {
    v1::MatmulStep* step = p.add_steps();
    step->set_kind(StepKindName(s.kind));
    step->set_notation(s.notation);
    step->set_axes(s.axes);
    if (s.plan) {
      for (Axis a : s.plan->spec().axes) step->add_physical_axes(AxisName(a));
    }
    step->set_bytes(s.bytes);
    for (const auto& [axis, b] : s.bytes_per_chip) (*step->mutable_bytes_per_chip())[axis] = b;
    step->set_flops(s.flops);
    step->set_predicted_s(s.predicted_s);
  }
  p.set_compute_s(c.compute_s);
  p.set_comm_s(c.comm_s);
  p.set_predicted_s(c.predicted_s());
  p.set_flops_per_chip(c.flops_per_chip);
  p.set_comm_bytes_per_chip(c.comm_bytes_per_chip);
  return p;
}

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

v1::Faults ToProto(const Faults& faults) {
  v1::Faults p;
  for (const SlowLink& s : faults.slow_links) {
    v1::SlowLink& m = *p.add_slow_links();
    m.set_axis(AxisName(s.axis));
    m.set_dir(s.dir);
    m.set_one_link(s.src >= 0);
    m.set_src(s.src);
    m.set_dst(s.dst);
    m.set_bandwidth(s.bandwidth);
    m.set_extra_latency_s(s.extra_latency_s);
    m.set_from_step(s.when.from_step);
    m.set_until_step(std::max(0, s.when.until_step));
    m.set_cause(s.cause);
  }
  for (const Straggler& s : faults.stragglers) {
    v1::Straggler& m = *p.add_stragglers();
    m.set_chip(s.chip);
    m.set_factor(s.factor);
    m.set_from_step(s.when.from_step);
    m.set_until_step(std::max(0, s.when.until_step));
  }
  for (const DownLink& d : faults.down_links) {
    v1::DownLink& m = *p.add_down_links();
    m.set_axis(AxisName(d.axis));
    m.set_dir(d.dir);
    m.set_src(d.src);
    m.set_dst(d.dst);
    m.set_from_step(d.when.from_step);
    m.set_until_step(std::max(0, d.when.until_step));
  }
  p.set_route_around(faults.route_around);
  for (const WorkerFault& w : faults.workers) {
    v1::WorkerFault& m = *p.add_workers();
    m.set_kill(w.kill);
    m.set_host(w.host);
    m.set_at_step(w.at_step);
    m.set_pause_s(w.pause_s);
  }
  return p;
}

absl::StatusOr<Faults> FromProto(const v1::Faults& p) {
  Faults faults;
  auto window = [](const auto& m) { return StepWindow{m.from_step(), m.until_step() > 0 ? m.until_step() : -1}; };
  auto axis_of = [](const std::string& kind, const std::string& name) -> absl::StatusOr<Axis> {
    auto axis = ParseAxis(name);
    if (!axis.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("faults: ", kind, " axis '", name, "': allowed: x, y, z, dcn"));
    }
    return axis;
  };
  for (const v1::SlowLink& m : p.slow_links()) {
    auto axis = axis_of("slow_link", m.axis());
    if (!axis.ok()) return axis.status();
    faults.slow_links.push_back({*axis, m.dir(), m.one_link() ? m.src() : -1, m.one_link() ? m.dst() : -1,
                                 m.bandwidth(), m.extra_latency_s(), window(m), m.cause()});
  }
  for (const v1::Straggler& m : p.stragglers()) faults.stragglers.push_back({m.chip(), m.factor(), window(m)});
  for (const v1::DownLink& m : p.down_links()) {
    auto axis = axis_of("down_link", m.axis());
    if (!axis.ok()) return axis.status();
    faults.down_links.push_back({*axis, m.dir(), m.src(), m.dst(), window(m)});
  }
  faults.route_around = p.route_around();
  for (const v1::WorkerFault& m : p.workers()) faults.workers.push_back({m.kill(), m.host(), m.at_step(), m.pause_s()});
  return faults;
}

v1::CollectiveSpec ToProto(const CollectiveSpec& spec) {
  v1::CollectiveSpec p;
  p.set_op(OpName(spec.op));
  for (Axis a : spec.axes) p.add_axes(AxisName(a));
  p.set_bytes(spec.bytes);
  p.set_algorithm(AlgorithmName(spec.algorithm));
  p.set_dtype_bytes(spec.dtype_bytes);
  p.set_seed(spec.seed);
  p.set_chunk_bytes(spec.chunk_bytes);
  p.set_num_slices(spec.num_slices);
  if (!spec.faults.empty() || spec.faults.route_around) *p.mutable_faults() = ToProto(spec.faults);
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
  spec.num_slices = p.num_slices();
  auto faults = FromProto(p.faults());
  if (!faults.ok()) return faults.status();
  spec.faults = *std::move(faults);
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
  p.set_compute_s(r.compute_s);
  p.set_flops(r.flops);
  p.set_step(r.step);
  p.set_loss_sum(r.loss_sum);
  for (int k = 0; k < kMeshAxes; ++k) {
    p.add_mesh_comm_s(r.mesh_comm_s[k]);
    p.add_mesh_bytes(r.mesh_bytes[k]);
    p.add_mesh_busy_s(r.mesh_busy_s[k]);
  }
  for (double part : r.compute_parts_s) p.add_compute_parts_s(part);
  p.set_pipeline_end_s(r.pipeline_end_s);
  p.set_pipeline_busy_s(r.pipeline_busy_s);
  p.set_peak_activation_bytes(r.peak_activation_bytes);
  for (const TraceEvent& e : r.trace) *p.add_trace() = ToProto(e);
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
  r.compute_s = p.compute_s();
  r.flops = p.flops();
  r.step = p.step();
  r.loss_sum = p.loss_sum();
  for (int k = 0; k < kMeshAxes && k < p.mesh_comm_s_size(); ++k) r.mesh_comm_s[k] = p.mesh_comm_s(k);
  for (int k = 0; k < kMeshAxes && k < p.mesh_bytes_size(); ++k) r.mesh_bytes[k] = p.mesh_bytes(k);
  for (int k = 0; k < 3 && k < p.compute_parts_s_size(); ++k) r.compute_parts_s[k] = p.compute_parts_s(k);
  for (int k = 0; k < kMeshAxes && k < p.mesh_busy_s_size(); ++k) r.mesh_busy_s[k] = p.mesh_busy_s(k);
  r.pipeline_end_s = p.pipeline_end_s();
  r.pipeline_busy_s = p.pipeline_busy_s();
  r.peak_activation_bytes = p.peak_activation_bytes();
  for (const v1::TraceEvent& t : p.trace()) r.trace.push_back({t.track(), t.name(), t.start_s(), t.end_s(), t.bytes()});
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
  p.set_seed_formula_s(r.seed_formula_s);
  p.set_seed_ratio(r.seed_ratio);
  for (const std::string& f : r.faults) p.add_faults(f);
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


v1::MatmulSpec ToProto(const MatmulSpec& spec) {
  v1::MatmulSpec p;
  p.set_expr(spec.expr);
  p.set_dims(spec.dims);
  p.set_mesh(spec.mesh);
  p.set_seed(spec.seed);
  p.set_dtype_bytes(spec.dtype_bytes);
  p.set_values(ValueKindName(spec.values));
  p.set_chunk_bytes(spec.chunk_bytes);
  return p;
}

absl::StatusOr<MatmulSpec> FromProto(const v1::MatmulSpec& p) {
  MatmulSpec spec;
  spec.expr = p.expr();
  spec.dims = p.dims();
  spec.mesh = p.mesh();
  if (p.seed() != 0) spec.seed = p.seed();
  if (p.dtype_bytes() != 0) spec.dtype_bytes = p.dtype_bytes();
  auto values = ParseValueKind(p.values().empty() ? "uniform" : p.values());
  if (!values.ok()) return values.status();
  spec.values = *values;
  if (p.chunk_bytes() != 0) spec.chunk_bytes = p.chunk_bytes();
  return spec;
}

v1::MatmulResult PlanToProto(const MatmulPlan& plan) {
  v1::MatmulResult p;
  p.set_expr(plan.problem.text);
  p.set_mesh(plan.problem.mesh.Describe());
  p.set_dtype_bytes(plan.options.dtype_bytes);
  *p.mutable_plan() = ToProto(plan.chosen());
  for (size_t i = 1; i < plan.candidates.size(); ++i) *p.add_alternatives() = ToProto(plan.candidates[i]);
  p.set_why(plan.why);
  p.set_flops_per_chip(plan.chosen().flops_per_chip);
  p.set_predicted_s(plan.chosen().predicted_s());
  return p;
}

v1::MatmulResult ToProto(const MatmulReport& r) {
  v1::MatmulResult p;
  p.set_expr(r.expr);
  p.set_mesh(r.mesh);
  p.set_dtype_bytes(r.dtype_bytes);
  *p.mutable_plan() = ToProto(r.candidates.front());
  for (size_t i = 1; i < r.candidates.size(); ++i) *p.add_alternatives() = ToProto(r.candidates[i]);
  p.set_why(r.why);
  for (const auto& [axis, b] : r.comm_bytes) (*p.mutable_comm_bytes())[axis] = b;
  p.set_comm_bytes_total(r.comm_bytes_total);
  p.set_flops_per_chip(r.flops_per_chip);
  p.set_emulated_s(r.emulated_s);
  p.set_compute_s(r.compute_s);
  p.set_comm_s(r.comm_s);
  p.set_predicted_s(r.predicted_s);
  p.set_ratio(r.ratio);
  p.set_wall_s(r.wall_s);
  p.set_host_lag_s(r.host_lag_s);
  p.set_max_rel_err(r.max_rel_err);
  p.set_correct(r.correct);
  for (const LinkUse& l : r.links) *p.add_links() = ToProto(l);
  return p;
}

v1::TraceEvent ToProto(const TraceEvent& e) {
  v1::TraceEvent p;
  p.set_track(e.track);
  p.set_name(e.name);
  p.set_start_s(e.start_s);
  p.set_end_s(e.end_s);
  p.set_bytes(e.bytes);
  return p;
}

v1::MemoryUse ToProto(const MemoryItem& m) {
  v1::MemoryUse p;
  p.set_item(m.name);
  p.set_bytes(m.bytes);
  return p;
}

v1::LayerCost ToProto(const LayerCost& l) {
  v1::LayerCost p;
  p.set_what(l.what);
  p.set_formula(l.formula);
  p.set_predicted_bytes(l.predicted_bytes);
  p.set_emulated_bytes(l.emulated_bytes);
  p.set_predicted_s(l.predicted_s);
  p.set_time_formula(l.time_formula);
  p.set_emulated_s(l.emulated_s);
  return p;
}

v1::TrainSummary ToProto(const TrainReport& r) {
  v1::TrainSummary p;
  p.set_mesh(r.mesh);
  p.set_pipeline_schedule(r.pipeline_schedule);
  p.set_stages(r.stages);
  p.set_microbatches(r.microbatches);
  p.set_repeats(r.repeats);
  for (const MemoryItem& m : r.memory_per_chip) *p.add_memory_per_chip() = ToProto(m);
  p.set_hbm_bytes(r.hbm_bytes);
  p.set_model_flops_per_step(r.model_flops_per_step);
  p.set_param_l2(r.param_l2);
  for (const LayerCost& l : r.per_layer) *p.add_per_layer() = ToProto(l);
  return p;
}

v1::TrainStep ToProto(const StepReport& r) {
  v1::TrainStep p;
  p.set_step(r.step);
  p.set_loss(r.loss);
  p.set_emulated_step_s(r.emulated_s);
  p.set_compute_s(r.compute_s);
  auto& comm = *p.mutable_exposed_comm_s();
  auto& bytes = *p.mutable_comm_bytes_per_chip();
  for (MeshAxisKind k : kAllMeshAxes) {
    comm[MeshAxisName(k)] = r.exposed_comm_s[static_cast<int>(k)];
    (*p.mutable_comm_s())[MeshAxisName(k)] = r.comm_s[static_cast<int>(k)];
    bytes[MeshAxisName(k)] = r.comm_bytes[static_cast<int>(k)];
  }
  bytes["total"] = r.comm_bytes_total;
  auto& split = *p.mutable_compute_split_s();
  split["forward_matmul"] = r.compute_parts_s[0];
  split["backward_matmul"] = r.compute_parts_s[1];
  split["other"] = r.compute_parts_s[2];
  p.set_mfu(r.mfu);
  p.set_tokens_per_s_emulated(r.tokens_per_s_emulated);
  p.set_tokens_per_s_wall(r.tokens_per_s_wall);
  p.set_wall_s(r.wall_s);
  p.set_host_lag_s(r.host_lag_s);
  p.set_bubble_fraction(r.bubble_fraction);
  p.set_bubble_formula(r.bubble_formula);
  p.set_bubble_with_transfers(r.bubble_with_transfers);
  p.set_bubble_microbatch_compute_s(r.bubble_microbatch_compute_s);
  p.set_bubble_hop_s(r.bubble_hop_s);
  p.set_peak_activation_bytes(r.peak_activation_bytes);
  for (const std::string& f : r.faults) p.add_faults(f);
  return p;
}

v1::HostMemory ToProto(const HostMemoryUse& m) {
  v1::HostMemory p;
  p.set_host(m.host);
  p.set_before_bytes(m.before_bytes);
  p.set_peak_bytes(m.peak_bytes);
  return p;
}

HostMemoryUse FromProto(const v1::HostMemory& p) {
  return {p.host(), p.before_bytes(), p.peak_bytes()};
}

v1::Placement ToProto(const Placement& p) {
  v1::Placement proto;
  proto.set_first_slice(p.first_slice);
  proto.set_num_slices(p.num_slices);
  if (!p.whole_slices()) {
    for (int a = 0; a < 3; ++a) {
      proto.add_origin(p.origin[a]);
      proto.add_block(p.block[a]);
    }
  }
  return proto;
}

Placement FromProto(const v1::Placement& proto) {
  Placement p{proto.first_slice(), proto.num_slices()};
  // Anything but three sizes is whole slices (PlacedNetwork checks the rest).
  if (proto.origin_size() == 3 && proto.block_size() == 3) {
    for (int a = 0; a < 3; ++a) {
      p.origin[a] = proto.origin(a);
      p.block[a] = proto.block(a);
    }
  }
  return p;
}

v1::ChipCheck ToProto(const ChipCheck& c) {
  v1::ChipCheck p;
  p.set_chip(c.chip);
  p.set_mismatches(c.mismatches);
  p.set_max_abs_err(c.max_abs_err);
  p.set_max_abs_ref(c.max_abs_ref);
  p.set_param_squares(c.param_squares);
  return p;
}

ChipCheck FromProto(const v1::ChipCheck& p) {
  return {p.chip(), p.mismatches(), p.max_abs_err(), p.max_abs_ref(), p.param_squares()};
}

}  // namespace tpuemu
