#include "coordinator/metrics.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/job/kinds.h"

namespace tpuemu {

void Histogram::Observe(double v) {
  const auto bucket = std::lower_bound(bounds_.begin(), bounds_.end(), v);
  if (bucket != bounds_.end()) ++counts_[bucket - bounds_.begin()];
  sum_ += v;
  ++count_;
}

void Histogram::Write(std::string& out, const std::string& name, const std::string& kind) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    WriteSample(out, name + "_bucket", {{"kind", kind}, {"le", PrometheusNumber(bounds_[i])}}, cumulative);
  }
  WriteSample(out, name + "_bucket", {{"kind", kind}, {"le", "+Inf"}}, count_);
  WriteSample(out, name + "_sum", {{"kind", kind}}, sum_);
  WriteSample(out, name + "_count", {{"kind", kind}}, count_);
}

StepMetrics::StepMetrics() {
  for (const std::string& kind : JobKindNames()) kinds_[kind];
}

void StepMetrics::RecordStep(const std::string& kind, const std::vector<ChipRunResult>& chips) {
  double wall = 0, emulated = 0, lag = 0;
  std::map<std::string, double> bytes;
  for (const ChipRunResult& c : chips) {
    wall = std::max(wall, c.wall_s);
    emulated = std::max(emulated, c.emulated_s);
    lag = std::max(lag, c.host_lag_s);
    for (const LinkUse& l : c.links) bytes[l.axis == Axis::kDcn ? "dcn" : "ici"] += static_cast<double>(l.emu_bytes);
  }
  std::lock_guard<std::mutex> lock(mu_);
  PerKind& k = kinds_[kind];
  ++k.steps;
  k.wall.Observe(wall);
  k.emulated.Observe(emulated);
  k.host_lag.Observe(lag);
  for (const auto& [link, b] : bytes) link_bytes_[link] += b;
}

void StepMetrics::Write(std::string& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  WriteMetricHeader(out, "tpuemu_steps_total", "counter",
                    "Steps finished by every worker of a job (a collective or matmul job has one), by job kind.");
  for (const auto& [kind, k] : kinds_) WriteSample(out, "tpuemu_steps_total", {{"kind", kind}}, k.steps);
  WriteMetricHeader(out, "tpuemu_step_wall_seconds", "histogram",
                    "Wall time of a step on the workers: its slowest chip's data movement and compute.");
  for (const auto& [kind, k] : kinds_) k.wall.Write(out, "tpuemu_step_wall_seconds", kind);
  WriteMetricHeader(out, "tpuemu_step_emulated_seconds", "histogram",
                    "Emulated time of a step (the TPU clock): its slowest chip's.");
  for (const auto& [kind, k] : kinds_) k.emulated.Write(out, "tpuemu_step_emulated_seconds", kind);
  WriteMetricHeader(out, "tpuemu_step_host_lag_seconds", "histogram",
                    "Paced pods: wall time a step's slowest chip ran beyond its emulated time x the time scale.");
  for (const auto& [kind, k] : kinds_) k.host_lag.Write(out, "tpuemu_step_host_lag_seconds", kind);
  WriteMetricHeader(out, "tpuemu_link_emulated_bytes_total", "counter",
                    "Emulated bytes finished steps put on links, by link kind (ici, dcn).");
  for (const char* link : {"ici", "dcn"}) {
    auto it = link_bytes_.find(link);
    WriteSample(out, "tpuemu_link_emulated_bytes_total", {{"link", link}}, it == link_bytes_.end() ? 0 : it->second);
  }
}

}  // namespace tpuemu
