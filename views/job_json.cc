#include "views/job_json.h"

#include <cmath>

#include "views/job_views.h"
#include "views/worker_memory.h"
#include "core/pod/placement.h"
#include "services/flag_names.h"
#include "services/proto_conv.h"

namespace tpuemu {

nlohmann::json CollectiveJson(const v1::Job& job) {
  const v1::CollectiveResult& r = job.result();
  nlohmann::json links = nlohmann::json::array();
  for (const auto& l : r.links()) {
    links.push_back({{"src", l.src()}, {"dst", l.dst()}, {"axis", l.axis()}, {"dir", l.dir() > 0 ? "+" : "-"},
                     {"bytes", l.emu_bytes()}});
  }
  return {{"job", job.id()},
          {"op", r.op()},
          {"axes", r.axes()},
          {"n", r.n()},
          {"bytes", r.bytes()},
          {"dtype", r.dtype_bytes() == 2 ? "bf16" : "f32"},
          {"algorithm", r.algorithm()},
          {"emulated_s", r.emulated_s()},
          {"predicted_s", r.predicted_s()},
          {"ratio", r.ratio()},
          {"seed_formula_s", r.seed_formula_s() > 0 ? nlohmann::json(r.seed_formula_s()) : nlohmann::json()},
          {"seed_ratio", r.seed_formula_s() > 0 ? nlohmann::json(r.seed_ratio()) : nlohmann::json()},
          {"wall_s", r.wall_s()},
          {"algbw_gbps", r.algbw_gbps()},
          {"busbw_gbps", r.busbw_gbps()},
          {"emulated_algbw_gbps", r.emulated_algbw_gbps()},
          {"emulated_busbw_gbps", r.emulated_busbw_gbps()},
          {"host_lag_s", r.host_lag_s()},
          {"link_bytes", links},
          {"faults", std::vector<std::string>(r.faults().begin(), r.faults().end())},
          {"correct", r.correct()},
          {"mismatches", r.mismatches()},
          {"worker_memory", WorkerMemoryJson(job)}};
}

static nlohmann::json CandidateJson(const v1::MatmulCandidate& c) {
  nlohmann::json steps = nlohmann::json::array();
  for (const v1::MatmulStep& s : c.steps()) {
    nlohmann::json step = {{"step", s.notation()}, {"kind", s.kind()}, {"predicted_s", s.predicted_s()}};
    if (s.kind() == "Multiply") {
      step["flops"] = s.flops();
    } else if (s.kind() != "DynamicSlice") {
      step["collective"] = s.kind();
      step["axes"] = s.axes();
      step["physical_axes"] = s.physical_axes();
      step["bytes"] = s.bytes();
      step["bytes_per_chip"] = s.bytes_per_chip();
    } else {
      step["axes"] = s.axes();
    }
    steps.push_back(step);
  }
  return {{"summary", c.summary()},           {"steps", steps},
          {"predicted_s", c.predicted_s()},   {"compute_s", c.compute_s()},
          {"comm_s", c.comm_s()},             {"flops_per_chip", c.flops_per_chip()},
          {"comm_bytes_per_chip", c.comm_bytes_per_chip()}};
}

nlohmann::json MatmulJson(const v1::MatmulResult& r, const std::string& job) {
  const nlohmann::json plan = CandidateJson(r.plan());
  nlohmann::json alternatives = nlohmann::json::array();
  for (const auto& c : r.alternatives()) alternatives.push_back(CandidateJson(c));
  nlohmann::json out = {{"expr", r.expr()},
                        {"mesh", r.mesh()},
                        {"dtype", r.dtype_bytes() == 2 ? "bf16" : "f32"},
                        {"plan", plan["steps"]},
                        {"plan_summary", r.plan().summary()},
                        {"why", r.why()},
                        {"alternatives", alternatives},
                        {"flops_per_chip", r.flops_per_chip()},
                        {"predicted_s", {{"total", r.plan().predicted_s()},
                                         {"compute", r.plan().compute_s()},
                                         {"communication", r.plan().comm_s()}}}};
  if (job.empty()) return out;  // planned only
  nlohmann::json bytes = {{"total", r.comm_bytes_total()}};
  for (const auto& [axis, b] : r.comm_bytes()) bytes[axis] = b;
  out["job"] = job;
  out["comm_bytes"] = bytes;
  out["emulated_s"] = {{"total", r.emulated_s()}, {"compute", r.compute_s()}, {"communication", r.comm_s()}};
  out["ratio"] = r.ratio();
  out["wall_s"] = r.wall_s();
  out["host_lag_s"] = r.host_lag_s();
  out["max_rel_err"] = r.max_rel_err();
  out["correct"] = r.correct();
  return out;
}

nlohmann::json TrainStepJson(const v1::TrainStep& s, const v1::TrainSummary& summary) {
  nlohmann::json memory = nlohmann::json::object();
  for (const v1::MemoryUse& m : summary.memory_per_chip()) memory[m.item()] = m.bytes();
  nlohmann::json exposed = nlohmann::json::object();
  for (const auto& [axis, t] : s.exposed_comm_s()) exposed[axis] = t;
  nlohmann::json bytes = nlohmann::json::object();
  for (const auto& [axis, b] : s.comm_bytes_per_chip()) bytes[axis] = b;
  nlohmann::json busy = nlohmann::json::object();
  for (const auto& [axis, t] : s.comm_s()) busy[axis] = t;
  nlohmann::json split = nlohmann::json::object();
  for (const auto& [part, t] : s.compute_split_s()) split[part] = t;
  return {{"step", s.step()},
          {"loss", std::isnan(s.loss()) ? nlohmann::json(nullptr) : nlohmann::json(s.loss())},  // null: shape-only
          {"emulated_step_s", s.emulated_step_s()},
          {"compute_s", s.compute_s()},
          {"compute_split_s", split},
          {"exposed_comm_s", exposed},
          {"comm_s", busy},
          {"mfu", s.mfu()},
          {"tokens_per_s_emulated", s.tokens_per_s_emulated()},
          {"tokens_per_s_wall", s.tokens_per_s_wall()},
          {"wall_s", s.wall_s()},
          {"comm_bytes_per_chip", bytes},
          {"memory_per_chip", memory},
          {"hbm_bytes", summary.hbm_bytes()},
          {"host_lag_s", s.host_lag_s()},
          {"bubble_fraction", s.bubble_fraction()},
          {"bubble_formula", s.bubble_formula()},
          {"bubble_with_transfers", s.bubble_with_transfers()},
          {"bubble_microbatch_compute_s", s.bubble_microbatch_compute_s()},
          {"bubble_hop_s", s.bubble_hop_s()},
          {"faults", std::vector<std::string>(s.faults().begin(), s.faults().end())},
          {"peak_activation_bytes", s.peak_activation_bytes()}};
}

std::string JobState(const v1::Job& job) {
  static const char* kStates[] = {"unspecified", "pending",   "running",    "succeeded",
                                  "failed",      "cancelled", "interrupted"};
  return kStates[job.state()];
}

std::string HowItEnded(const v1::Job& job) {
  switch (job.state()) {
    case v1::JOB_STATE_CANCELLED: return "was cancelled";
    case v1::JOB_STATE_INTERRUPTED: return "was interrupted: " + job.error();
    default: return "failed: " + job.error();
  }
}

std::string PlacementText(const v1::Job& job) {
  if (job.started_unix_s() <= 0) return "-";
  const v1::Placement& p = job.placement();
  if (p.num_slices() == 0) return "whole pod";  // a column's width, not DescribePlacement's phrase
  return DescribePlacement(FromProto(p));
}

nlohmann::json JobJson(const v1::Job& job) {
  const JobView& view = ViewOf(job);
  nlohmann::json out = {{"id", job.id()},
                        {"kind", view.kind},
                        {"state", JobState(job)},
                        {"submitted_unix_s", job.submitted_unix_s()},
                        {"priority", job.priority()}};
  if (!job.error().empty()) out["error"] = WithFlagNames(job.error());
  if (!job.unsaved().empty()) out["unsaved"] = job.unsaved();
  if (job.started_unix_s() > 0) {
    out["started_unix_s"] = job.started_unix_s();
    const v1::Placement& p = job.placement();
    out["placement"] = {{"first_slice", p.first_slice()}, {"num_slices", p.num_slices()}, {"text", PlacementText(job)}};
    if (p.block_size() > 0) {
      out["placement"]["origin"] = std::vector<int>(p.origin().begin(), p.origin().end());
      out["placement"]["block"] = std::vector<int>(p.block().begin(), p.block().end());
    }
  }
  if (job.finished_unix_s() > 0) out["finished_unix_s"] = job.finished_unix_s();
  if (job.checkpoint_step() > 0) {
    out["checkpoint_step"] = job.checkpoint_step();
    out["checkpoint_layout"] = job.checkpoint_layout();
  }
  if (job.restarts() > 0) {
    out["restarts"] = job.restarts();
    out["automatic_restarts"] = job.automatic_restarts();  // by max_restarts; the others by `tpuemu resume`
    out["restart_reason"] = job.restart_reason();
  }
  if (job.queue_position() > 0) {
    out["queue_position"] = job.queue_position();
    out["waiting_for"] = job.waiting_for();
  }
  view.add_json(job, out);
  if (!job.worker_memory().empty()) out["worker_memory"] = WorkerMemoryJson(job);
  return out;
}

void AddTrainJson(const v1::Job& job, nlohmann::json& out) {
  nlohmann::json steps = nlohmann::json::array();
  for (const v1::TrainStep& s : job.steps()) steps.push_back(TrainStepJson(s, job.train_summary()));
  out["name"] = job.train().config().name();  // the job file's name: label ("job" when it gives none)
  out["source"] = job.train().source();
  out["steps"] = steps;
  out["steps_dropped"] = job.steps_dropped();  // records of the first steps, not in `steps`
  const v1::TrainSummary& sum = job.train_summary();
  nlohmann::json summary = {{"mesh", sum.mesh()}, {"hbm_bytes", sum.hbm_bytes()},
                            {"model_flops_per_step", sum.model_flops_per_step()}};
  if (sum.param_l2() > 0) summary["param_l2"] = sum.param_l2();
  summary["pipeline"] = {{"schedule", sum.pipeline_schedule()}, {"stages", sum.stages()},
                         {"microbatches", sum.microbatches()}, {"repeats", sum.repeats()}};
  nlohmann::json per_layer = nlohmann::json::array();
  for (const v1::LayerCost& l : sum.per_layer()) {
    per_layer.push_back({{"what", l.what()}, {"formula", l.formula()}, {"predicted_bytes", l.predicted_bytes()},
                         {"emulated_bytes", l.emulated_bytes()}, {"predicted_s", l.predicted_s()},
                         {"time_formula", l.time_formula()},
                         {"emulated_s", l.emulated_s()}});
  }
  summary["per_layer"] = per_layer;
  out["summary"] = summary;
}

}  // namespace tpuemu
