// The pod's metrics in Prometheus' text exposition format (issue 20, scraped
// from the coordinator's HTTP port at /metrics): what jobs did, counted as
// their steps finish (StepMetrics, fed by the scheduler), and what the pod
// is now, read when scraped (the Coordinator writes those gauges), in the
// format core/base/prometheus_text.h writes.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/base/prometheus_text.h"
#include "core/host/chip_result.h"

namespace tpuemu {

// A cumulative histogram with fixed upper bounds (seconds).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size(), 0) {}
  void Observe(double v);
  // Its _bucket (with le="+Inf"), _sum and _count lines, labelled `kind`.
  void Write(std::string& out, const std::string& name, const std::string& kind) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not yet cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Counters and histograms of finished steps, by job kind ("train", "collective", "matmul").
class StepMetrics {
 public:
  // Every kind's series from the start, at 0: a query or an alert on a kind
  // that has not run yet finds 0, not nothing.
  StepMetrics();
  // One step of a job of `kind`, from every chip's result.
  void RecordStep(const std::string& kind, const std::vector<ChipRunResult>& chips);
  void Write(std::string& out) const;

 private:
  struct PerKind {
    uint64_t steps = 0;
    Histogram wall{{1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1, 3, 10, 30, 100}};
    Histogram emulated{{1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1, 10}};
    Histogram host_lag{{1e-4, 1e-3, 1e-2, 0.1, 1, 10}};
  };
  mutable std::mutex mu_;
  std::map<std::string, PerKind> kinds_;
  std::map<std::string, double> link_bytes_;  // by link kind: "ici", "dcn"
};

}  // namespace tpuemu
