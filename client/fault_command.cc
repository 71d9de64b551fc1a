#include "client/fault_command.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli_checks.h"
#include "client/cli_errors.h"
#include "client/coordinator_client.h"
#include "client/pod_state.h"
#include "core/pod/faults.h"
#include "nlohmann/json.hpp"
#include "services/proto_conv.h"

namespace tpuemu {
namespace {

struct FaultOptions {
  std::string id;
  std::vector<std::string> slow_links, stragglers, down_links;
  std::string on_down_link;  // empty: the job's own
  int from_step = 0;
  std::string coordinator;
  bool json = false;
};

int AddFaults(const FaultOptions& o) {
  auto faults = ParseFaultFlags(o.slow_links, o.stragglers, o.down_links);
  if (!faults.ok()) return Fail(faults.status());
  if (!o.on_down_link.empty()) {
    // Faults::With keeps route_around once either side asks, so a job that
    // routes cannot be turned back to failing.
    if (o.on_down_link != "route") {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          "--on-down-link '", o.on_down_link,
          "': allowed: route (a running job fails on a down link it needs unless its file or this flag says route)")));
    }
    faults->route_around = true;
  }
  if (faults->empty() && !faults->route_around) {
    return Fail(absl::InvalidArgumentError(
        "no fault given: add --slow-link, --straggler or --down-link (or --on-down-link route)"));
  }
  auto address = ResolveCoordinator(o.coordinator);
  if (!address.ok()) return Fail(address.status());
  v1::AddFaultsRequest request;
  request.set_id(o.id);
  *request.mutable_faults() = ToProto(*faults);
  request.set_from_step(o.from_step);
  auto added = CoordinatorClient(*address).AddFaults(request);
  if (!added.ok()) return Fail(added.status());
  if (o.json) {
    std::printf("%s\n", nlohmann::json{{"id", o.id},
                                       {"added", std::vector<std::string>(added->described().begin(),
                                                                          added->described().end())}}
                            .dump(2)
                            .c_str());
  } else {
    std::printf("%s: %s\n", o.id.c_str(), absl::StrJoin(added->described(), "; ").c_str());
  }
  return 0;
}

}  // namespace

void AddFaultCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<FaultOptions>();
  auto* c = app.add_subcommand("fault", "add faults to a running training job, from its next step");
  c->footer(
      "The faults join the job from the first step not yet sent to its workers (or --from-step, if\n"
      "later), on every worker at the same step, and its step reports list them; they last for the\n"
      "attempt running (a resumed job runs with its file's faults). Forms as in a job file's\n"
      "faults: key, with 'from STEP' and 'until STEP' windows. Needs the admin token. Examples:\n"
      "  tpuemu fault job-3 --slow-link x@0.5\n"
      "  tpuemu fault job-3 --straggler '5@2 until 40' --down-link '0->1 y+' --on-down-link route\n"
      "docs/faults.md");
  c->add_option("JOB", o->id, "a running training job's id (job-3, or 3)")->required()->transform(JobId());
  c->add_option("--slow-link", o->slow_links, "links at a fraction of their bandwidth and/or later: x@0.5, "
                                              "'0->1 x+@1+2us' (repeatable)");
  c->add_option("--straggler", o->stragglers, "a chip computing slower: CHIP@FACTOR, e.g. 3@2 (repeatable)");
  c->add_option("--down-link", o->down_links,
                "a link carrying nothing: '0->1 x+' (repeatable); a collective that needs it fails the job,\n"
                "unless the job's file or --on-down-link says route");
  c->add_option("--on-down-link", o->on_down_link,
                "route: from now on, a ring that wraps goes the other way round a down link instead of\n"
                "failing the job (a line cannot; the job file's on_down_link key does it from the start)");
  c->add_option("--from-step", o->from_step, "no sooner than this step")
      ->capture_default_str()
      ->check(ZeroOrMore());
  c->add_option("--coordinator", o->coordinator, "coordinator HOST:PORT (default: $TPUEMU_COORDINATOR, "
                                                 "else the pod `cluster up` started)");
  c->add_flag("--json", o->json, "print {\"id\", \"added\": [...]}");
  c->callback([o, exit_code] { *exit_code = AddFaults(*o); });
}

}  // namespace tpuemu
