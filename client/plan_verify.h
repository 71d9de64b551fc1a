// `tpuemu plan --verify K`: a plan's mesh run shape-only on the emulated pod
// (core/job/symmetric_pod.h, or every chip on small pods), beside what the
// planner predicts for the same blocks. Training jobs hold seed 001's MLP
// block (gated when the model is), not attention or the vocabulary, so both
// sides count the MLP blocks alone: the prediction is the planner's for the
// model without attention and vocabulary.
#pragma once

#include <string>

#include "core/plan/planner.h"
#include "core/pod/topology.h"
#include "nlohmann/json.hpp"

namespace tpuemu {

struct Verified {
  bool ran = false;
  std::string why_not;         // when it did not run
  std::string job_mesh;        // the training mesh it ran on, as jobs describe it
  std::string engine;          // "one chip for all" | "every chip"
  double batch_tokens = 0;     // the batch it ran with (a multiple of the batch shards)
  MeshPlan predicted;          // the planner's, MLP blocks alone
  double step_s = 0, compute_s = 0, exposed_comm_s = 0, busy_comm_s = 0;  // emulated
  double wall_s = 0;
};

Verified VerifyPlan(const MeshPlan& plan, const ModelShape& model, const Topology& topo, double batch_tokens);

nlohmann::json VerifiedJson(const Verified& v);

}  // namespace tpuemu
