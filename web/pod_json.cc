#include "web/pod_json.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tpuemu {

std::string LinkId(int src, int dst, const std::string& axis, int dir) {
  return absl::StrCat(src, "->", dst, " ", axis, dir > 0 ? "+" : "-");
}

nlohmann::json PodJson(const Topology& topo, const v1::ClusterStatus& status) {
  std::map<int, const v1::WorkerInfo*> worker_of_host;
  for (const v1::WorkerInfo& w : status.workers()) worker_of_host[w.host()] = &w;
  nlohmann::json workers = nlohmann::json::array();
  for (int host = 0; host < topo.num_hosts(); ++host) {
    auto it = worker_of_host.find(host);
    const v1::WorkerInfo* w = it == worker_of_host.end() ? nullptr : it->second;
    workers.push_back({{"host", host},
                       {"slice", topo.SliceOfHost(host)},
                       {"address", w ? w->address() : ""},
                       {"state", !w ? "missing" : !w->alive() ? "lost" : w->slow() ? "slow" : "alive"},
                       {"resident_bytes", w ? w->resident_bytes() : 0}});
  }
  nlohmann::json chips = nlohmann::json::array();
  nlohmann::json links = nlohmann::json::array();
  for (int chip = 0; chip < topo.num_chips(); ++chip) {
    const Coord c = topo.CoordOf(chip);
    chips.push_back({{"id", chip}, {"slice", c.slice}, {"host", topo.HostOf(chip)}, {"xyz", c.xyz}});
    for (const Topology::OutgoingLink& l : topo.OutgoingLinks(chip)) {
      const std::string axis = AxisName(l.axis);
      links.push_back({{"id", LinkId(chip, l.peer, axis, l.dir)},
                       {"src", chip},
                       {"dst", l.peer},
                       {"axis", axis},
                       {"dir", l.dir > 0 ? "+" : "-"},
                       {"kind", l.axis == Axis::kDcn ? "dcn" : "ici"}});
    }
  }
  return {{"description", status.description()},
          {"topology", topo.request().topology},
          {"shape", {topo.AxisSize(Axis::kX), topo.AxisSize(Axis::kY), topo.AxisSize(Axis::kZ)}},
          {"slices", topo.slices()},
          {"chips_per_host", topo.chips_per_host()},
          {"ready", status.ready()},
          {"jobs_running", status.jobs_running()},
          {"workers", workers},
          {"chips", chips},
          {"links", links}};
}

nlohmann::json JobLinksJson(const v1::Job& job, JobTraceReader* trace) {
  nlohmann::json links = nlohmann::json::object();
  const auto add_result_links = [&](const auto& uses) {
    for (const v1::LinkUse& l : uses) {
      nlohmann::json& entry = links[LinkId(l.src(), l.dst(), l.axis(), l.dir())];
      const uint64_t before = entry.is_object() ? entry["bytes"].get<uint64_t>() : 0;
      entry = {{"bytes", before + l.emu_bytes()}};
    }
  };
  std::string source = "result";
  if (job.has_collective()) {
    add_result_links(job.result().links());
  } else if (job.has_matmul()) {
    add_result_links(job.matmul_result().links());
  } else if (trace != nullptr) {
    source = "trace";
    std::map<std::string, std::pair<uint64_t, double>> sums;  // by track: bytes, busy seconds
    v1::JobTrace piece;
    while (trace->Next(1 << 20, &piece)) {
      for (const v1::TraceEvent& e : piece.events()) {
        if (!absl::StartsWith(e.track(), "link ")) continue;
        auto& [bytes, busy] = sums[e.track().substr(5)];
        bytes += e.bytes();
        busy += e.end_s() - e.start_s();
      }
    }
    for (const auto& [id, sum] : sums) links[id] = {{"bytes", sum.first}, {"busy_s", sum.second}};
  }
  return {{"job", job.id()}, {"source", source}, {"links", links}};
}

}  // namespace tpuemu
