// The coordinator's web view (issue 20): a page that draws the pod as its
// torus, the job list and a job's steps, per-layer table and timeline, kept
// live by polling the JSON routes below. An adapter over CoordinatorBackend,
// as the gRPC service is: it reads what `tpuemu status`, `jobs` and `trace`
// read. The page's files (web/assets/) are built into the binary; it loads
// nothing from anywhere else.
//
//   /                         the page (index.html, app.js, style.css)
//   /api/pod                  chips, links and workers (web/pod_json.h)
//   /api/jobs                 every job kept, as `tpuemu jobs --json` rows
//   /api/jobs/ID[?steps=N]    the job as `tpuemu status ID --json` (its latest N steps)
//   /api/jobs/ID/links        what each link carried (web/pod_json.h)
//   /api/jobs/ID/trace.json   its trace as `tpuemu trace ID` writes it;
//                             ?steps=N: the latest N steps' spans only
#pragma once

#include <map>
#include <string>

#include "core/pod/topology.h"
#include "services/coordinator_service.h"
#include "services/http_server.h"

namespace tpuemu {

// The routes, to serve beside /metrics; `backend` and `topo` outlive them.
std::map<std::string, HttpHandler> WebViewRoutes(CoordinatorBackend& backend, const Topology& topo);

}  // namespace tpuemu
