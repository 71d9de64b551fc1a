#include "worker/worker_metrics.h"

#include "absl/strings/str_cat.h"
#include "core/base/process_memory.h"
#include "core/base/prometheus_text.h"

namespace tpuemu {

void WorkerMetrics::StepRan(const std::vector<ChipRunResult>& chips) {
  uint64_t ici = 0, dcn = 0;
  for (const ChipRunResult& chip : chips) {
    for (const LinkUse& l : chip.links) (l.axis == Axis::kDcn ? dcn : ici) += l.emu_bytes;
  }
  ici_bytes_.fetch_add(ici, std::memory_order_relaxed);
  dcn_bytes_.fetch_add(dcn, std::memory_order_relaxed);
}

std::string WorkerMetrics::Text(const WorkerStatusView& status, const Topology* topo) const {
  using Labels = std::vector<std::pair<std::string, std::string>>;
  const std::string host = std::to_string(status.host);
  const auto load = [](const std::atomic<uint64_t>& v) { return static_cast<double>(v.load(std::memory_order_relaxed)); };
  const auto gauge = [&](std::string& out, const char* name, const char* help, double value) {
    WriteMetricHeader(out, name, "gauge", help);
    WriteSample(out, name, {{"host", host}}, value);
  };
  std::string out;
  gauge(out, "tpuemu_worker_configured", "1 once the coordinator gave this worker the pod", status.configured);
  gauge(out, "tpuemu_worker_chips", "emulated chips this host holds", static_cast<double>(status.chips.size()));
  double links[2] = {0, 0};  // ici, dcn
  if (topo != nullptr) {
    for (int chip : status.chips) {
      for (const Topology::OutgoingLink& l : topo->OutgoingLinks(chip)) ++links[l.axis == Axis::kDcn ? 1 : 0];
    }
  }
  WriteMetricHeader(out, "tpuemu_worker_links", "gauge", "directed links leaving this host's chips, by kind");
  WriteSample(out, "tpuemu_worker_links", {{"host", host}, {"link", "ici"}}, links[0]);
  WriteSample(out, "tpuemu_worker_links", {{"host", host}, {"link", "dcn"}}, links[1]);
  gauge(out, "tpuemu_worker_job_running", "1 while a job's call runs on this host", status.running_job != 0);

  static constexpr const char* kCallNames[kNumCalls] = {"prepare", "run", "check"};
  WriteMetricHeader(out, "tpuemu_worker_calls_total", "counter",
                    "the coordinator's calls that did a job's work here and succeeded (run: one per step)");
  for (int c = 0; c < kNumCalls; ++c) {
    WriteSample(out, "tpuemu_worker_calls_total", {{"host", host}, {"call", kCallNames[c]}}, load(calls_[c]));
  }
  WriteMetricHeader(out, "tpuemu_worker_errors_total", "counter", "those calls that failed here");
  for (int c = 0; c < kNumCalls; ++c) {
    WriteSample(out, "tpuemu_worker_errors_total", {{"host", host}, {"call", kCallNames[c]}}, load(failures_[c]));
  }
  const auto counter = [&](const char* name, const char* help, double value) {
    WriteMetricHeader(out, name, "counter", help);
    WriteSample(out, name, {{"host", host}}, value);
  };
  counter("tpuemu_worker_aborts_total", "jobs the coordinator aborted here", load(aborts_));
  counter("tpuemu_worker_frames_received_total", "frames other hosts' chips sent to this host's", load(frames_));
  counter("tpuemu_worker_frame_payload_bytes_received_total", "those frames' payload bytes (host bytes)",
          load(frame_bytes_));
  counter("tpuemu_worker_frames_dropped_total", "frames of jobs this worker did not run, dropped",
          static_cast<double>(status.frames_dropped));
  gauge(out, "tpuemu_worker_frames_waiting", "received frames no chip has taken yet",
        static_cast<double>(status.frames_waiting));
  WriteMetricHeader(out, "tpuemu_worker_link_emulated_bytes_total", "counter",
                    "emulated bytes this host's chips put on their links in finished steps, by link kind");
  WriteSample(out, "tpuemu_worker_link_emulated_bytes_total", Labels{{"host", host}, {"link", "ici"}}, load(ici_bytes_));
  WriteSample(out, "tpuemu_worker_link_emulated_bytes_total", Labels{{"host", host}, {"link", "dcn"}}, load(dcn_bytes_));
  gauge(out, "tpuemu_worker_resident_bytes", "the process's resident memory (VmRSS)",
        static_cast<double>(ResidentBytes()));
  return out;
}

}  // namespace tpuemu
