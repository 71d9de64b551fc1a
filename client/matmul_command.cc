#include "client/matmul_command.h"

#include <cstdio>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli_checks.h"
#include "client/cli_errors.h"
#include "client/coordinator_client.h"
#include "views/job_json.h"
#include "views/worker_memory.h"
#include "client/job_wait.h"
#include "client/pod_state.h"
#include "core/matmul/spec.h"
#include "core/base/units.h"
#include "nlohmann/json.hpp"
#include "services/proto_conv.h"

namespace tpuemu {
namespace {

struct MatmulOptionsCli {
  std::string expr;
  std::string dims;
  std::string mesh;
  std::string dtype = "bf16";
  std::string values = "uniform";
  uint64_t seed = 1;
  std::string chunk = "1MiB";
  bool explain = false;
  bool plan_only = false;
  bool json = false;
  std::string topology;  // --plan-only without a pod
  int slices = 1;
  std::string coordinator;
};

std::string StepCost(const v1::MatmulStep& s) {
  if (s.kind() == "Multiply") return absl::StrCat(absl::StrFormat("%.3g", static_cast<double>(s.flops())), " flop/chip");
  if (s.kind() == "DynamicSlice") return "local, no communication";
  std::vector<std::string> parts;
  for (const auto& [axis, b] : s.bytes_per_chip()) parts.push_back(absl::StrCat(axis, " ", FormatBytes(b)));
  std::sort(parts.begin(), parts.end());
  return absl::StrCat(absl::StrJoin(parts, ", "), " sent/chip");
}

void PrintPlan(const v1::MatmulCandidate& c) {
  int i = 1;
  for (const v1::MatmulStep& s : c.steps()) {
    std::printf("  %d. %-58s %-24s %10s\n", i++, s.notation().c_str(), StepCost(s).c_str(),
                s.kind() == "DynamicSlice" ? "" : FormatSeconds(s.predicted_s()).c_str());
  }
}

void PrintText(const v1::MatmulResult& r, const std::string& where, bool explain, bool ran) {
  std::printf("%s\n  on %s, mesh %s, %s\n\nplan (predicted %s: compute %s + communication %s):\n", r.expr().c_str(),
              where.c_str(), r.mesh().c_str(), r.dtype_bytes() == 2 ? "bf16" : "f32",
              FormatSeconds(r.plan().predicted_s()).c_str(), FormatSeconds(r.plan().compute_s()).c_str(),
              FormatSeconds(r.plan().comm_s()).c_str());
  PrintPlan(r.plan());
  if (explain) {
    std::printf("\nwhy: %s\n", r.why().c_str());
    const int shown = std::min(r.alternatives_size(), 4);
    for (int i = 0; i < shown; ++i) {
      const auto& c = r.alternatives(i);
      std::printf("\nalternative %d: %s (compute %s + communication %s)\n", i + 1,
                  FormatSeconds(c.predicted_s()).c_str(), FormatSeconds(c.compute_s()).c_str(),
                  FormatSeconds(c.comm_s()).c_str());
      PrintPlan(c);
    }
    if (r.alternatives_size() > shown) {
      std::printf("\n(%d more valid plans, all dearer; --json lists them)\n", r.alternatives_size() - shown);
    }
  } else if (r.alternatives_size() > 0) {
    std::printf("  (%d other valid plans were dearer; --explain compares them)\n", r.alternatives_size());
  }
  if (!ran) return;
  std::vector<std::string> bytes;
  for (const auto& [axis, b] : r.comm_bytes()) bytes.push_back(absl::StrCat(axis, " ", FormatBytes(b)));
  std::sort(bytes.begin(), bytes.end());
  std::printf(
      "\nresult: %s, max relative error %.3g against a one-device BLIS product\n"
      "emulated %s = compute %s + communication %s   (predicted %s, ratio %.3f)\n"
      "sent per chip, counted on the links: %s\n"
      "flops per chip: %.4g   wall: %s   host lag: %s\n",
      r.correct() ? "correct" : "WRONG", r.max_rel_err(), FormatSeconds(r.emulated_s()).c_str(),
      FormatSeconds(r.compute_s()).c_str(), FormatSeconds(r.comm_s()).c_str(), FormatSeconds(r.predicted_s()).c_str(),
      r.ratio(), bytes.empty() ? "nothing" : absl::StrJoin(bytes, ", ").c_str(),
      static_cast<double>(r.flops_per_chip()), FormatSeconds(r.wall_s()).c_str(), FormatSeconds(r.host_lag_s()).c_str());
}

int RunMatmul(const MatmulOptionsCli& o) {
  MatmulSpec spec;
  spec.expr = o.expr;
  spec.dims = o.dims;
  spec.mesh = o.mesh;
  spec.seed = o.seed;
  if (o.dtype != "bf16" && o.dtype != "f32") {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--dtype '", o.dtype, "': allowed: bf16, f32")));
  }
  spec.dtype_bytes = o.dtype == "bf16" ? 2 : 4;
  auto values = ParseValueKind(o.values);
  if (!values.ok()) return Fail(values.status());
  spec.values = *values;
  auto chunk = ParseBytes(o.chunk, "--chunk");
  if (!chunk.ok()) return Fail(chunk.status());
  spec.chunk_bytes = *chunk;

  // The pod's topology, or the one given for planning without a pod.
  std::unique_ptr<CoordinatorClient> client;
  TopologyRequest request{o.topology, o.slices, 4, "auto"};
  if (!o.topology.empty()) {
    if (!o.plan_only) {
      return Fail(absl::InvalidArgumentError(
          "--topology plans without a pod and needs --plan-only; to run, start a pod with `tpuemu cluster up`"));
    }
  } else {
    if (o.slices != 1) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          "--slices ", o.slices, ": only with --topology, to plan without a pod; a pod's slices are its own")));
    }
    auto address = ResolveCoordinator(o.coordinator);
    if (!address.ok()) {
      if (!o.plan_only) return Fail(address.status());
      return Fail(absl::Status(address.status().code(),
                               absl::StrCat(address.status().message(), "; or plan without a pod: --topology CHIP:SHAPE")));
    }
    client = std::make_unique<CoordinatorClient>(*address);
    auto status = client->Status();
    if (!status.ok()) return Fail(status.status());
    request = FromProto(status->spec());
  }
  auto topo = Topology::Create(request);
  if (!topo.ok()) return Fail(topo.status());
  auto plan = PlanMatmulSpec(spec, *topo);
  if (!plan.ok()) return Fail(plan.status());

  if (o.plan_only) {
    const v1::MatmulResult r = PlanToProto(*plan);
    if (o.json) {
      std::cout << MatmulJson(r, "").dump(2) << "\n";
    } else {
      PrintText(r, topo->Describe(), o.explain, false);
    }
    return 0;
  }
  v1::SubmitJobRequest req;
  *req.mutable_matmul() = ToProto(spec);
  auto job = RunJob(*client, req, absl::StrCat("matmul ", plan->chosen().summary));
  if (!job.ok()) return Fail(job.status());
  const v1::MatmulResult& r = job->matmul_result();
  if (o.json) {
    nlohmann::json out = MatmulJson(r, job->id());
    out["worker_memory"] = WorkerMemoryJson(*job);
    std::cout << out.dump(2) << "\n";
  } else {
    PrintText(r, topo->Describe(), o.explain, true);
    if (const std::string memory = WorkerMemoryLine(*job); !memory.empty()) std::printf("%s\n", memory.c_str());
  }
  return r.correct() ? 0 : 1;
}

}  // namespace

void AddMatmulCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<MatmulOptionsCli>();
  auto* c = app.add_subcommand(
      "matmul", "multiply two sharded matrices written in the seeds' notation on the pod (planned, BLIS, checked)");
  c->footer(
      "tpuemu plans the communication (the four cases of How To Scale Your Model, part 3), every chip\n"
      "multiplies its blocks with BLIS, and the result is checked against a one-device BLIS product.\n\n"
      "Notation: OPERAND[DIM, ...] * OPERAND[DIM, ...] -> OUTPUT[DIM, ...]{U_AXES}\n"
      "  I_X      dimension I sharded over mesh axis X\n"
      "  I_XY     sharded over X and Y, X most significant (order matters)\n"
      "  {U_X}    output left unreduced (partial sums) over X\n"
      "Dimensions both operands share are contracted; any letters may name operands and dimensions.\n\n"
      "Examples:\n"
      "  tpuemu matmul \"A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]\" --dims I=1024,J=1024,K=1024\n"
      "  tpuemu matmul \"A[I, J_X] * B[J, K] -> C[I, K]\" --dims I=512,J=8192,K=64 --explain\n"
      "  tpuemu matmul \"In[B_X, M_Y] * Win[M_X, H_Y] -> Out[B_X, H_Y]\" --dims B=256,M=1024,H=4096 --json\n"
      "  tpuemu matmul \"A[I_D, J] * B[J, K] -> C[I_D, K]\" --dims I=64,J=64,K=64 --mesh D=dcn\n"
      "  tpuemu matmul \"A[I, J_X] * B[J_X, K] -> C[I, K]\" --dims I=8,J=8,K=8 --plan-only --topology v5p:2x4\n"
      "Details: docs/matmul.md");
  c->add_option("expr", o->expr, "the matmul in the seeds' notation (quote it)")->required();
  c->add_option("--dims", o->dims,
                "dimension sizes, NAME=SIZE,...; OPERAND.NAME=SIZE sets one operand's size only")
      ->required();
  c->add_option("--mesh", o->mesh,
                "mesh axis names bound to the pod's physical axes, NAME=AXIS,... with AXIS one of\n"
                "x, y, z, dcn (default: X=x, Y=y, Z=z for each axis of the pod longer than 1)");
  c->add_flag("--explain", o->explain, "show why the plan won: the runner-up plans with their costs");
  c->add_flag("--plan-only", o->plan_only, "print the plan and its predicted cost; run nothing");
  c->add_flag("--json", o->json,
              "print one JSON object: plan (steps in seed notation with collective, axes, bytes), comm_bytes by\n"
              "axis, flops_per_chip, emulated_s {total, compute, communication}, predicted_s, wall_s,\n"
              "max_rel_err, correct");
  c->add_option("--dtype", o->dtype, "emulated element type, for bytes and roofline: bf16 | f32 (host math is fp32)")
      ->capture_default_str();
  c->add_option("--values", o->values,
                "operand values: uniform (in [-1, 1)) | int (small integers: every sum exact, so the\n"
                "result must equal one device's bit for bit)")
      ->capture_default_str();
  c->add_option("--seed", o->seed, "seed of the deterministic operands")->check(WholeNumber64())->capture_default_str();
  c->add_option("--chunk", o->chunk, "wire chunk size (host bytes), 4KiB to 4MiB")->capture_default_str();
  c->add_option("--topology", o->topology, "with --plan-only: plan for CHIP:SHAPE instead of the running pod");
  c->add_option("--slices", o->slices, "with --topology: number of slices")->capture_default_str();
  c->add_option("--coordinator", o->coordinator,
                "coordinator HOST:PORT (default: $TPUEMU_COORDINATOR, else the pod `cluster up` started)");
  c->callback([o, exit_code] { *exit_code = RunMatmul(*o); });
}

}  // namespace tpuemu
