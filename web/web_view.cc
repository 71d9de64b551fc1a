#include "web/web_view.h"

#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_cat.h"

#include "nlohmann/json.hpp"
#include "views/chrome_trace.h"
#include "views/job_json.h"
#include "views/job_views.h"
#include "web/pod_json.h"
#include "web/web_assets.h"

namespace tpuemu {
namespace {

constexpr const char* kJsonType = "application/json";
// A job id as the coordinator makes them ("job-12"), and nothing that could
// reach another route.
constexpr const char* kJobId = "([A-Za-z0-9_.-]+)";

HttpResponse Json(const nlohmann::json& body) { return {200, kJsonType, body.dump()}; }

HttpResponse Error(const absl::Status& status) {
  const int code = absl::IsNotFound(status) ? 404 : absl::IsInvalidArgument(status) ? 400 : 503;
  return {code, kJsonType, nlohmann::json{{"error", std::string(status.message())}}.dump()};
}

// A job as the list shows it: JobJson without its heavy parts, at the top or
// in its result (a collective's link_bytes, a matmul's plan and alternatives).
nlohmann::json JobRow(const v1::Job& job) {
  nlohmann::json row = JobJson(job);
  for (const char* heavy : {"steps", "summary", "link_bytes", "worker_memory", "plan", "alternatives"}) {
    row.erase(heavy);
    if (row.contains("result") && row["result"].is_object()) row["result"].erase(heavy);
  }
  row["steps_done"] = StepsDone(job);
  row["steps_total"] = ViewOf(job).steps(job);
  row["what"] = ViewOf(job).what(job);
  return row;
}

// ?steps=N: only the latest N steps (what a page shows of a long job); 0
// when absent: all of them.
absl::StatusOr<int64_t> LatestSteps(const HttpRequest& req) {
  auto n = req.params.find("steps");
  if (n == req.params.end()) return 0;
  int64_t keep = 0;
  if (!absl::SimpleAtoi(n->second, &keep) || keep < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("steps=", n->second, ": give how many of the latest steps to send (at least 1), e.g. steps=50"));
  }
  return keep;
}

}  // namespace

std::map<std::string, HttpHandler> WebViewRoutes(CoordinatorBackend& backend, const Topology& topo) {
  std::map<std::string, HttpHandler> routes;
  for (const WebAsset& asset : WebAssets()) {
    // Routes are patterns: the dot in "/app.js" is meant as a dot.
    routes[absl::StrReplaceAll(std::string(asset.path), {{".", "\\."}})] = [&asset](const HttpRequest&) {
      return HttpResponse{200, std::string(asset.content_type), std::string(asset.body)};
    };
  }
  routes["/api/pod"] = [&backend, &topo](const HttpRequest&) { return Json(PodJson(topo, backend.ClusterStatus())); };
  routes["/api/jobs"] = [&backend](const HttpRequest&) {
    const v1::ListJobsResponse list = backend.ListJobs();
    nlohmann::json jobs = nlohmann::json::array();
    for (const v1::Job& job : list.jobs()) jobs.push_back(JobRow(job));
    return Json({{"jobs", jobs},
                 {"finished_jobs_dropped", list.finished_jobs_dropped()},
                 {"finished_jobs_kept", list.finished_jobs_kept()}});
  };
  routes[std::string("/api/jobs/") + kJobId] = [&backend, &topo](const HttpRequest& req) {
    auto job = backend.GetJob(req.groups.at(0));
    if (!job.ok()) return Error(job.status());
    const absl::StatusOr<int64_t> keep = LatestSteps(req);
    if (!keep.ok()) return Error(keep.status());
    nlohmann::json out = JobJson(*job);
    if (*keep > 0 && out.contains("steps")) {
      nlohmann::json& steps = out["steps"];
      if (steps.size() > static_cast<size_t>(*keep)) steps.erase(steps.begin(), steps.end() - *keep);
    }
    // The page draws the job on the pod: its trace names chips by the job's ids.
    if (const std::vector<int> chips = JobPodChips(topo, *job); !chips.empty()) out["pod_chips"] = chips;
    out["steps_done"] = StepsDone(*job);
    out["steps_total"] = ViewOf(*job).steps(*job);
    return Json(out);
  };
  routes[std::string("/api/jobs/") + kJobId + "/links"] = [&backend, &topo](const HttpRequest& req) {
    auto job = backend.GetJob(req.groups.at(0));
    if (!job.ok()) return Error(job.status());
    std::unique_ptr<JobTraceReader> trace;
    if (job->has_train()) {
      auto reader = backend.ReadJobTrace(job->id(), 0);
      if (reader.ok()) trace = *std::move(reader);
    }
    return Json(JobLinksJson(topo, *job, trace.get()));
  };
  // A running job's page asks for the latest steps' spans only: the whole
  // trace of a long job (up to a million spans) every two seconds kept a
  // browser busy for longer than that.
  routes[std::string("/api/jobs/") + kJobId + "/trace\\.json"] = [&backend](const HttpRequest& req) {
    const absl::StatusOr<int64_t> keep = LatestSteps(req);
    if (!keep.ok()) return Error(keep.status());
    auto reader = backend.ReadJobTrace(req.groups.at(0), *keep);
    if (!reader.ok()) return Error(reader.status());
    std::ostringstream out;
    ChromeTraceWriter writer(out);
    v1::JobTrace piece;
    while ((*reader)->Next(1 << 20, &piece)) writer.Add(piece);
    writer.Finish();
    return HttpResponse{200, kJsonType, out.str()};
  };
  return routes;
}

}  // namespace tpuemu
