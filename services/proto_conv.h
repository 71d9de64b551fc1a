// Translation between the core's types and tpuemu.v1 messages.
#pragma once

#include "absl/status/statusor.h"
#include "core/collective/report.h"
#include "core/collective/spec.h"
#include "core/matmul/report.h"
#include "core/matmul/spec.h"
#include "core/pod/placement.h"
#include "core/pod/pod_config.h"
#include "core/train/report.h"
#include "tpuemu/v1/collective.pb.h"
#include "tpuemu/v1/matmul.pb.h"
#include "tpuemu/v1/pod.pb.h"
#include "tpuemu/v1/train.pb.h"
#include "tpuemu/v1/worker.pb.h"

namespace tpuemu {

v1::Faults ToProto(const Faults& faults);
// Fails only on an axis name that is no axis; CheckFaults checks the rest.
absl::StatusOr<Faults> FromProto(const v1::Faults& proto);

v1::CollectiveSpec ToProto(const CollectiveSpec& spec);
absl::StatusOr<CollectiveSpec> FromProto(const v1::CollectiveSpec& proto);

v1::TopologySpec ToProto(const TopologyRequest& req, double time_scale);
TopologyRequest FromProto(const v1::TopologySpec& proto);

v1::ChipResult ToProto(const ChipRunResult& r);
absl::StatusOr<ChipRunResult> FromProto(const v1::ChipResult& proto);

v1::CollectiveResult ToProto(const CollectiveReport& r);

v1::MatmulSpec ToProto(const MatmulSpec& spec);
absl::StatusOr<MatmulSpec> FromProto(const v1::MatmulSpec& proto);
// A plan that has not run: the measured fields stay 0.
v1::MatmulResult PlanToProto(const MatmulPlan& plan);
v1::MatmulResult ToProto(const MatmulReport& r);

v1::ChipCheck ToProto(const ChipCheck& c);
v1::HostMemory ToProto(const HostMemoryUse& m);
HostMemoryUse FromProto(const v1::HostMemory& proto);
v1::Placement ToProto(const Placement& p);
Placement FromProto(const v1::Placement& proto);
v1::TrainStep ToProto(const StepReport& r);
v1::TraceEvent ToProto(const TraceEvent& e);
v1::MemoryUse ToProto(const MemoryItem& m);
v1::LayerCost ToProto(const LayerCost& l);
v1::TrainSummary ToProto(const TrainReport& r);
ChipCheck FromProto(const v1::ChipCheck& proto);

}  // namespace tpuemu
