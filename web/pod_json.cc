#include "web/pod_json.h"

#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_cat.h"
#include "core/pod/placement.h"
#include "services/proto_conv.h"

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
                       // null: not known (lost, or no heartbeat yet)
                       {"resident_bytes", w && w->resident_bytes() > 0 ? nlohmann::json(w->resident_bytes()) : nullptr}});
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

std::vector<int> JobPodChips(const Topology& pod, const v1::Job& job) {
  if (job.started_unix_s() == 0) return {};
  return PlacedChips(pod, FromProto(job.placement()));
}

nlohmann::json JobLinksJson(const Topology& pod, const v1::Job& job, JobTraceReader* trace) {
  const std::vector<int> pod_chips = JobPodChips(pod, job);
  const auto on_pod = [&](int chip) {
    return chip >= 0 && chip < static_cast<int>(pod_chips.size()) ? pod_chips[chip] : chip;
  };
  nlohmann::json links = nlohmann::json::object();
  const auto add_result_links = [&](const auto& uses) {
    for (const v1::LinkUse& l : uses) {
      nlohmann::json& entry = links[LinkId(on_pod(l.src()), on_pod(l.dst()), l.axis(), l.dir())];
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
        // "link 3->4 x+", in the job's own ids.
        const std::vector<std::string> words = absl::StrSplit(e.track(), ' ');
        if (words.size() != 3 || words[0] != "link" || words[2].size() < 2) continue;
        const std::vector<std::string> ends = absl::StrSplit(words[1], "->");
        int src = 0, dst = 0;
        if (ends.size() != 2 || !absl::SimpleAtoi(ends[0], &src) || !absl::SimpleAtoi(ends[1], &dst)) continue;
        const std::string axis = words[2].substr(0, words[2].size() - 1);
        auto& [bytes, busy] = sums[LinkId(on_pod(src), on_pod(dst), axis, words[2].back() == '+' ? 1 : -1)];
        bytes += e.bytes();
        busy += e.end_s() - e.start_s();
      }
    }
    for (const auto& [id, sum] : sums) links[id] = {{"bytes", sum.first}, {"busy_s", sum.second}};
  }
  return {{"job", job.id()}, {"source", source}, {"links", links}};
}

}  // namespace tpuemu
